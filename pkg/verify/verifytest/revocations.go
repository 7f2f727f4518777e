package verifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RevocationFeed serves a revocation list in the issuer's format
// (GET /v1/revocations of API.md section 8), for tests of a
// verify.RevocationSource: the whole list, or with ?after=<cursor> only the
// entries added since, with an ETag that answers If-None-Match with 304
// while nothing was added. Entries whose until has passed (by Now) are left
// out. It is an http.Handler, safe for concurrent use; the zero value is
// ready.
type RevocationFeed struct {
	// Now decides which entries have expired; nil means time.Now. Set it
	// before serving, not concurrently.
	Now func() time.Time

	mu       sync.Mutex
	entries  []feedEntry // in the order added
	epoch    int         // cursors of an older epoch are refused with 410
	status   int         // when not 0, every request is answered with it
	requests []RevocationRequest
}

type feedEntry struct {
	session bool
	id      string
	until   time.Time
}

// RevocationRequest is what one request to a RevocationFeed asked for and
// got.
type RevocationRequest struct {
	After       string // the after parameter; "" for the whole list
	IfNoneMatch string
	Status      int
}

// RevokeSession adds sid to the list until until.
func (f *RevocationFeed) RevokeSession(sid string, until time.Time) { f.add(true, sid, until) }

// RevokeKey adds kid to the list until until.
func (f *RevocationFeed) RevokeKey(kid string, until time.Time) { f.add(false, kid, until) }

func (f *RevocationFeed) add(session bool, id string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, feedEntry{session: session, id: id, until: until.UTC()})
}

// Fail answers every request with status from now on; 0 serves again.
func (f *RevocationFeed) Fail(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

// ForgetCursors makes every cursor handed out so far unknown (410 Gone),
// as after a restore of the issuer's database.
func (f *RevocationFeed) ForgetCursors() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch++
}

// Requests returns the requests served so far, oldest first.
func (f *RevocationFeed) Requests() []RevocationRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RevocationRequest(nil), f.requests...)
}

// ServeHTTP answers GET with the list or the changes since ?after.
func (f *RevocationFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	req := RevocationRequest{After: r.URL.Query().Get("after"), IfNoneMatch: r.Header.Get("If-None-Match")}
	status := f.serve(w, r, req.After, req.IfNoneMatch)
	req.Status = status
	f.requests = append(f.requests, req)
}

func (f *RevocationFeed) serve(w http.ResponseWriter, r *http.Request, after, inm string) int {
	if f.status != 0 {
		http.Error(w, "feed down", f.status)
		return f.status
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return http.StatusMethodNotAllowed
	}
	from := 0
	if after != "" {
		ep, pos, ok := strings.Cut(after, ".")
		e, err1 := strconv.Atoi(ep)
		n, err2 := strconv.Atoi(pos)
		switch {
		case !ok || err1 != nil || err2 != nil || n < 0 || n > len(f.entries):
			http.Error(w, "bad cursor", http.StatusBadRequest)
			return http.StatusBadRequest
		case e != f.epoch:
			http.Error(w, "cursor no longer known", http.StatusGone)
			return http.StatusGone
		}
		from = n
	}
	cursor := fmt.Sprintf("%d.%d", f.epoch, len(f.entries))
	etag := `"` + cursor + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if after != "" && inm == etag {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	type entry struct {
		SID   string `json:"sid,omitempty"`
		KID   string `json:"kid,omitempty"`
		Until string `json:"until"`
	}
	body := struct {
		Sessions []entry `json:"sessions"`
		Keys     []entry `json:"keys"`
		Cursor   string  `json:"cursor"`
	}{Sessions: []entry{}, Keys: []entry{}, Cursor: cursor}
	now := time.Now()
	if f.Now != nil {
		now = f.Now()
	}
	for _, e := range f.entries[from:] {
		if !e.until.After(now) {
			continue
		}
		until := e.until.Format(time.RFC3339)
		if e.session {
			body.Sessions = append(body.Sessions, entry{SID: e.id, Until: until})
		} else {
			body.Keys = append(body.Keys, entry{KID: e.id, Until: until})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
	return http.StatusOK
}
