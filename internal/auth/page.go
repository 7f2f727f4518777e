package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// PageQuery is a page of a list: at most Limit entries after Cursor.
type PageQuery struct {
	Limit  int // 0: DefaultPageSize
	Cursor string
}

// Page sizes of the admin lists.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

func errMalformedField(field, msg string) error {
	e := apperr.New(apperr.KindMalformed, "malformed_request", "The request is not valid.")
	e.Fields = []apperr.FieldError{{Field: field, Code: "invalid", Message: msg}}
	return e
}

// ErrPageLimit is the answer to a page size out of range, or to a ?limit=
// that is no integer.
func ErrPageLimit() error {
	return errMalformedField("limit", "limit must be an integer from 1 to "+strconv.Itoa(MaxPageSize)+".")
}

// pageSize applies the default to 0 and refuses what is out of range.
func pageSize(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 1 || n > MaxPageSize:
		return 0, ErrPageLimit()
	}
	return n, nil
}

// The lists a cursor may belong to: a cursor of one list handed to another
// is refused rather than read as a position it never was.
const (
	cursorUsers    = "users"
	cursorSessions = "sessions"
	cursorAudit    = "audit"
)

// cursor is the position after the last entry of a page: its time and id,
// the key every list is ordered by. Clients see it as an opaque string,
// base64url of this JSON, so its form may change without breaking them.
type cursor struct {
	List string    `json:"l"`
	At   time.Time `json:"t"`
	ID   string    `json:"i"`
}

const maxCursorLen = 512

func encodeCursor(list string, at time.Time, id string) string {
	b, err := json.Marshal(cursor{List: list, At: at.UTC(), ID: id})
	if err != nil {
		// A struct of a string, a UTC time and a string always marshals.
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of list; anything else is a malformed request.
func decodeCursor(list, s string) (time.Time, string, error) {
	bad := errMalformedField("cursor", "The cursor is not valid; use the next_cursor of a previous page.")
	if len(s) > maxCursorLen {
		return time.Time{}, "", bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, "", bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c cursor
	if err := dec.Decode(&c); err != nil || dec.More() {
		return time.Time{}, "", bad
	}
	if c.List != list || c.At.IsZero() || c.ID == "" || !validText(c.ID, maxFilterLen) {
		return time.Time{}, "", bad
	}
	return c.At.UTC(), c.ID, nil
}

// listPage reads one page of a list kept in (time, ID) order: fetch
// gets limit+1 items after the cursor's position, so that one more item
// tells whether another page follows, and the page's last item becomes the
// next cursor ("" on the last page). list names the list, so a cursor of
// one list is refused by another.
func listPage[T any](pq PageQuery, list string, fetch func(limit int, after *store.PageCursor) ([]T, error), pos func(T) (time.Time, string)) ([]T, string, error) {
	limit, err := pageSize(pq.Limit)
	if err != nil {
		return nil, "", err
	}
	var after *store.PageCursor
	if pq.Cursor != "" {
		at, id, err := decodeCursor(list, pq.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &store.PageCursor{At: at, ID: id}
	}
	items, err := fetch(limit+1, after)
	if err != nil {
		return nil, "", apperr.Internal(err)
	}
	if len(items) <= limit {
		return items, "", nil
	}
	items = items[:limit]
	at, id := pos(items[limit-1])
	return items, encodeCursor(list, at, id), nil
}
