package issuerapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/palisade-auth/palisade/internal/auth"
)

type revokedSessionJSON struct {
	SID   string `json:"sid"`
	Until string `json:"until"`
}

type revokedKeyJSON struct {
	KID   string `json:"kid"`
	Until string `json:"until"`
}

type revocationsJSON struct {
	Sessions []revokedSessionJSON `json:"sessions"`
	Keys     []revokedKeyJSON     `json:"keys"`
	Cursor   string               `json:"cursor"`
}

// revocations serves the revocation feed (API.md section 8): the whole
// list, or with ?after=<cursor> what was added since (or the whole list:
// auth.ErrWholeList). The ETag names the
// cursor the answer carries, which stays the same while nothing is added,
// so a poll with If-None-Match is answered 304 until something is.
func (a *API) revocations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := q.Get("after")
	if q.Has("after") && (after == "" || len(q["after"]) > 1) {
		a.writeError(w, r, errMalformed("The after parameter must be one cursor from an earlier answer."))
		return
	}
	var answer feedAnswer
	var err error
	if after != "" {
		answer, err = a.readFeed(r.Context(), after)
	}
	if after == "" || errors.Is(err, auth.ErrWholeList) {
		// The whole list is the same for everyone and can be large: the
		// readers that ask while one is being built share the next one,
		// one body in memory for all of them.
		answer, err = a.fullFeed.do(r.Context())
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", answer.etag)
	if etagMatch(r.Header.Get("If-None-Match"), answer.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	a.writeRaw(w, http.StatusOK, answer.body)
}

// feedAnswer is one encoded answer of the feed and its entity tag.
type feedAnswer struct {
	body []byte
	etag string
}

func (a *API) readFeed(ctx context.Context, after string) (feedAnswer, error) {
	list, err := a.feed.List(ctx, after)
	if err != nil {
		return feedAnswer{}, err
	}
	body, err := json.Marshal(revocationsView(list))
	if err != nil {
		return feedAnswer{}, err
	}
	return feedAnswer{body: append(body, '\n'), etag: feedETag(list.Cursor)}, nil
}

func revocationsView(l auth.RevocationList) revocationsJSON {
	out := revocationsJSON{
		Sessions: make([]revokedSessionJSON, 0, len(l.Sessions)),
		Keys:     make([]revokedKeyJSON, 0, len(l.Keys)),
		Cursor:   l.Cursor,
	}
	for _, s := range l.Sessions {
		out.Sessions = append(out.Sessions, revokedSessionJSON{SID: s.ID, Until: rfc3339(s.Until)})
	}
	for _, k := range l.Keys {
		out.Keys = append(out.Keys, revokedKeyJSON{KID: k.ID, Until: rfc3339(k.Until)})
	}
	return out
}

// feedETag is the strong entity tag of an answer carrying cursor.
func feedETag(cursor string) string {
	sum := sha256.Sum256([]byte(cursor))
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
}

// etagMatch applies If-None-Match (RFC 9110 section 13.1.2, weak
// comparison): "*", or a list of entity tags one of which is etag.
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
