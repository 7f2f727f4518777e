package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// RevocationFeed serves the revocation feed (API.md section 8): the
// sessions and signing keys no token may be accepted for, each until no
// token it could affect is still valid. Sessions enter it in the
// transaction that revokes them (the store sees to that, for every way a
// session is revoked), keys when the key lifecycle revokes them, and a
// session that reaches its absolute lifetime unrevoked enters it at its
// end: the access tokens of its last refresh outlive it by up to one
// access-token lifetime.
type RevocationFeed struct {
	st        store.Queries
	keep      time.Duration // access-token TTL + clock skew
	cursorKey []byte        // authenticates the cursors the feed hands out
	now       func() time.Time
	log       *slog.Logger
}

// NewRevocationFeed returns the feed over st. An entry stays in it for
// accessTTL + clockSkew after its revocation: the longest an access token
// issued before it can still be accepted by a verifier allowing clockSkew.
// cursorKey (32 random bytes, the same on every replica) authenticates the
// cursors it hands out.
func NewRevocationFeed(st store.Queries, accessTTL, clockSkew time.Duration, cursorKey []byte, now func() time.Time, log *slog.Logger) *RevocationFeed {
	return &RevocationFeed{st: st, keep: accessTTL + clockSkew, cursorKey: cursorKey, now: now, log: log}
}

// RevokedID is one entry of the feed: a session id (sid) or key id (kid)
// and the time after which no token it could affect is valid.
type RevokedID struct {
	ID    string
	Until time.Time
}

// RevocationList is one answer of the feed.
type RevocationList struct {
	Sessions []RevokedID
	Keys     []RevokedID
	// Cursor is what the next read passes as after. When nothing was
	// added since after it is after itself, so that a reader that got
	// nothing new holds the same cursor (and an ETag made from it).
	Cursor string
}

// malformedCursor is the answer to a cursor the feed did not hand out.
func malformedCursor(err error) *apperr.Error {
	return apperr.Wrap(apperr.KindMalformed, "malformed_request",
		"The after parameter is not a cursor of this feed; read the full list again.", err)
}

// ErrWholeList is List's answer to a cursor whose changes are better read
// as the whole list, List(ctx, ""): one older than the feed's window (a
// reader away that long, or a cursor from another database, a restore),
// or one more than maxDelta entries behind. The whole list is the same for
// every reader, so a server builds it once for all who ask at once; the
// changes since an old cursor can be as large, built for one reader alone.
var ErrWholeList = errors.New("auth: read the whole revocation list")

// maxDelta is the most entries List answers a cursor with; past it the
// answer is ErrWholeList. A verifier polling every few seconds is that far
// behind only when revocations come faster than a hundred a second.
const maxDelta = 1000

// List returns every entry still in force when after is "", or only
// those added since the read that returned the cursor after (or
// ErrWholeList), and the cursor to read from next. A reader drops each
// entry itself when its Until has passed. One store query.
func (f *RevocationFeed) List(ctx context.Context, after string) (RevocationList, error) {
	now := f.now().UTC().Truncate(time.Microsecond)
	var mark *store.RevocationMark
	limit := 0
	if after != "" {
		m, err := f.decodeCursor(after)
		if err != nil {
			return RevocationList{}, malformedCursor(err)
		}
		if m.At.Before(now.Add(-f.keep)) {
			return RevocationList{}, ErrWholeList
		}
		mark, limit = &m, maxDelta+1
	}
	entries, next, err := f.st.Revocations(ctx, mark, now.Add(-f.keep), now, limit)
	if errors.Is(err, store.ErrBadMark) {
		return RevocationList{}, malformedCursor(err)
	}
	if err != nil {
		return RevocationList{}, Classify(err)
	}
	if mark != nil && len(entries) > maxDelta {
		return RevocationList{}, ErrWholeList
	}
	list := RevocationList{Sessions: []RevokedID{}, Keys: []RevokedID{}, Cursor: after}
	if mark == nil || len(entries) > 0 {
		list.Cursor = f.encodeCursor(next)
	}
	for _, e := range entries {
		id := RevokedID{ID: e.ID, Until: ceilSecond(e.At.Add(f.keep))}
		if e.Kind == store.RevokedKey {
			list.Keys = append(list.Keys, id)
		} else {
			list.Sessions = append(list.Sessions, id)
		}
	}
	return list, nil
}

// ceilSecond rounds t up to a whole second: the feed's times are RFC 3339
// seconds, and an entry must not leave a reader before its time.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// cursorVersion starts every cursor: a later format can tell its own. r1
// cursors were not authenticated: one naming the start of the store's
// order with a recent time read the whole list, built for it alone (the
// shared read serves only the whole list, ErrWholeList).
const cursorVersion = "r2"

// cursorMACLen is how many bytes of HMAC-SHA256 a cursor carries.
const cursorMACLen = 16

// encodeCursor makes the opaque cursor of a mark: base64url of
// "r2|<MAC>|<mark time, Unix microseconds>|<store position>", the MAC
// (base64url) over what follows it.
func (f *RevocationFeed) encodeCursor(m store.RevocationMark) string {
	body := strconv.FormatInt(m.At.UnixMicro(), 10) + "|" + m.Position
	raw := cursorVersion + "|" + base64.RawURLEncoding.EncodeToString(f.cursorMAC(body)) + "|" + body
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func (f *RevocationFeed) cursorMAC(body string) []byte {
	h := hmac.New(sha256.New, f.cursorKey)
	h.Write([]byte(body))
	return h.Sum(nil)[:cursorMACLen]
}

func (f *RevocationFeed) decodeCursor(c string) (store.RevocationMark, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return store.RevocationMark{}, fmt.Errorf("cursor: %w", err)
	}
	version, rest, _ := strings.Cut(string(raw), "|")
	mac, body, _ := strings.Cut(rest, "|")
	sum, err := base64.RawURLEncoding.DecodeString(mac)
	if version != cursorVersion || err != nil || !hmac.Equal(sum, f.cursorMAC(body)) {
		return store.RevocationMark{}, errors.New("cursor: not a cursor of this feed")
	}
	parts := strings.SplitN(body, "|", 2)
	if len(parts) != 2 {
		return store.RevocationMark{}, errors.New("cursor: not a feed cursor")
	}
	us, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || us < 0 {
		return store.RevocationMark{}, errors.New("cursor: bad time")
	}
	return store.RevocationMark{Position: parts[1], At: time.UnixMicro(us).UTC()}, nil
}

// pruneBatch bounds the rows one pruning statement deletes.
const pruneBatch = 1000

// Prune deletes the entries that have left the feed (revoked more than
// the access-token TTL plus clock skew ago), a bounded batch per
// statement, and returns how many it deleted.
func (f *RevocationFeed) Prune(ctx context.Context) (int, error) {
	before := f.now().UTC().Truncate(time.Microsecond).Add(-f.keep)
	total := 0
	for {
		n, err := f.st.PruneRevocations(ctx, before, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// RunPruner prunes every interval until ctx ends. Failures are logged:
// the entries stay, and the feed's reads skip them anyway.
func (f *RevocationFeed) RunPruner(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := f.Prune(ctx); err != nil && ctx.Err() == nil {
			f.log.WarnContext(ctx, "pruning the revocation feed failed", "err", err)
		}
	}
}
