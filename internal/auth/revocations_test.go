package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// feedSkew is the clock skew the fixture's feed allows verifiers.
const feedSkew = 30 * time.Second

func (f *fixture) feed() *auth.RevocationFeed {
	return auth.NewRevocationFeed(f.st, 15*time.Minute, feedSkew, f.sealer.DeriveSecret("revocation-cursor"), f.clock.Now, slog.New(slog.DiscardHandler))
}

func list(t *testing.T, feed *auth.RevocationFeed, after string) auth.RevocationList {
	t.Helper()
	l, err := feed.List(context.Background(), after)
	if err != nil {
		t.Fatalf("List(%q) = %v, want nil", after, err)
	}
	return l
}

func checkIDs(t *testing.T, what string, got, want []auth.RevokedID) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !got[i].Until.Equal(want[i].Until) {
			t.Errorf("%s = %v, want %v", what, got, want)
			return
		}
	}
}

func TestRevocationFeed(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		feed := f.feed()
		f.user(t, "feed@example.com")
		// A fraction of a second: until rounds up to the next second.
		f.clock.Advance(250 * time.Millisecond)
		d1 := f.login(t, "feed@example.com", "d1")
		d2 := f.login(t, "feed@example.com", "d2")

		start := list(t, feed, "")
		checkIDs(t, "List(\"\") before any revocation", start.Sessions, nil)
		if start.Cursor == "" {
			t.Fatalf("List(\"\").Cursor = \"\", want a cursor")
		}

		logoutAt := f.clock.Now()
		if err := f.svc.Logout(ctx, d1.RefreshToken, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		until := logoutAt.Add(15*time.Minute + feedSkew).Truncate(time.Second).Add(time.Second)
		delta := list(t, feed, start.Cursor)
		checkIDs(t, "List(start) after logout", delta.Sessions, []auth.RevokedID{{ID: d1.SessionID, Until: until}})
		checkIDs(t, "List(start).Keys after logout", delta.Keys, nil)
		if delta.Cursor == start.Cursor {
			t.Errorf("List(start).Cursor after a change = the start cursor, want a new one")
		}

		same := list(t, feed, delta.Cursor)
		checkIDs(t, "List(cursor) with nothing new", same.Sessions, nil)
		if same.Cursor != delta.Cursor {
			t.Errorf("List(cursor) with nothing new: Cursor = %q, want the same %q", same.Cursor, delta.Cursor)
		}

		// A revoked key, as the key lifecycle records it.
		if err := f.st.AppendRevocation(ctx, store.RevokedKey, "kid-x", f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		keys := list(t, feed, delta.Cursor)
		checkIDs(t, "List(cursor).Keys after a key revocation", keys.Keys, []auth.RevokedID{{ID: "kid-x", Until: until}})
		checkIDs(t, "List(cursor).Sessions after a key revocation", keys.Sessions, nil)

		// One second before until the entry is there; at until it is gone,
		// and pruning deletes it.
		f.clock.Set(until.Add(-time.Second))
		checkIDs(t, "List(\"\") just before until", list(t, feed, "").Sessions, []auth.RevokedID{{ID: d1.SessionID, Until: until}})
		f.clock.Set(until)
		full := list(t, feed, "")
		checkIDs(t, "List(\"\") at until", full.Sessions, nil)
		checkIDs(t, "List(\"\").Keys at until", full.Keys, nil)
		if n, err := feed.Prune(ctx); err != nil || n != 2 {
			t.Errorf("Prune() = %d, %v; want 2, nil", n, err)
		}
		// A cursor older than the window is read as the whole list: here
		// a key revoked with a time after the cursor's but committed before
		// it, which a delta would not send again.
		if _, err := feed.List(ctx, start.Cursor); !errors.Is(err, auth.ErrWholeList) {
			t.Errorf("List(start) after the window = %v, want ErrWholeList", err)
		}
		f.clock.Set(until.Add(time.Hour))
		if err := f.st.AppendRevocation(ctx, store.RevokedKey, "kid-y", f.clock.Now().Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		old := list(t, feed, "").Cursor
		checkIDs(t, "List(cursor) with a fresh cursor", list(t, feed, old).Keys, nil)
		f.clock.Advance(15*time.Minute + feedSkew + time.Second)
		if _, err := feed.List(ctx, old); !errors.Is(err, auth.ErrWholeList) {
			t.Errorf("List(cursor older than the window) = %v, want ErrWholeList", err)
		}
		whole := list(t, feed, "")
		yUntil := until.Add(time.Hour + 10*time.Minute + 15*time.Minute + feedSkew)
		checkIDs(t, "List(\"\").Keys", whole.Keys, []auth.RevokedID{{ID: "kid-y", Until: yUntil}})
		_ = d2 // another device's session: never in the feed above
	})
}

func TestRevocationFeedLifetimeEnd(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0, func(c *auth.Config) { c.SessionMaxLifetime = time.Hour })
		feed := f.feed()
		f.user(t, "end@example.com")
		p := f.login(t, "end@example.com", "d1")
		end := f.clock.Now().Add(time.Hour)
		f.clock.Set(end.Add(-10 * time.Minute)) // a cursor the window still covers at the end
		start := list(t, feed, "")

		f.clock.Set(end.Add(-time.Second))
		checkIDs(t, "List(start) before the session's end", list(t, feed, start.Cursor).Sessions, nil)
		f.clock.Set(end.Add(time.Minute))
		want := []auth.RevokedID{{ID: p.SessionID, Until: end.Add(15*time.Minute + feedSkew)}}
		delta := list(t, feed, start.Cursor)
		checkIDs(t, "List(start) after the session's end", delta.Sessions, want)
		checkIDs(t, "List(\"\") after the session's end", list(t, feed, "").Sessions, want)
		checkIDs(t, "List(cursor) after the session's end", list(t, feed, delta.Cursor).Sessions, nil)
		f.clock.Set(end.Add(15*time.Minute + feedSkew))
		checkIDs(t, "List(\"\") at until", list(t, feed, "").Sessions, nil)
	})
}

func TestRevocationFeedMalformedCursor(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		feed := f.feed()
		b64 := base64.RawURLEncoding.EncodeToString
		now := strconv.FormatInt(f.clock.Now().UnixMicro(), 10)
		later := strconv.FormatInt(f.clock.Now().UnixMicro()+1, 10)
		real, err := base64.RawURLEncoding.DecodeString(list(t, feed, "").Cursor)
		if err != nil {
			t.Fatal(err)
		}
		version, rest, _ := strings.Cut(string(real), "|")
		mac, _, _ := strings.Cut(rest, "|")
		for _, c := range []string{
			"!!!", "cjE", b64([]byte("r1|1|")) + "=", b64([]byte("r2|1|1")), b64([]byte("r1|x|1")),
			b64([]byte("r1|-5|1")), b64([]byte("r1|" + now + "|not a position")), b64([]byte("r1|1")),
			// r1 cursors were not authenticated: one naming position 0
			// with a recent time read the whole list, built for it alone.
			b64([]byte("r1|" + now + "|0")), b64([]byte("r1|" + now + "|1:1:")),
			// The real cursor's MAC on another time or position.
			b64([]byte(version + "|" + mac + "|" + later + "|0")), b64([]byte(version + "|" + mac + "|" + later + "|1:1:")),
			b64([]byte(version + "|" + mac + "|1|")), b64([]byte(version + "||" + now + "|0")),
			b64(append(real, 'x')),
		} {
			_, err := feed.List(context.Background(), c)
			wantCode(t, "List("+c+")", err, "malformed_request")
		}
		// Another feed's key: the cursor is not this feed's.
		other := auth.NewRevocationFeed(f.st, 15*time.Minute, feedSkew, make([]byte, 32), f.clock.Now, slog.New(slog.DiscardHandler))
		_, err = other.List(context.Background(), list(t, feed, "").Cursor)
		wantCode(t, "List(a cursor of a feed with another key)", err, "malformed_request")
	})
}

// TestRevocationFeedFarBehind: a cursor more than a thousand entries
// behind is answered ErrWholeList, one that many behind with its changes.
func TestRevocationFeedFarBehind(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		feed := f.feed()
		start := list(t, feed, "").Cursor
		appendKeys := func(n int) {
			err := f.st.InTx(context.Background(), func(q store.Queries) error {
				for range n {
					if err := q.AppendRevocation(context.Background(), store.RevokedKey, "kid-"+strconv.Itoa(rand.IntN(1e9)), f.clock.Now()); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		appendKeys(1000)
		if got := list(t, feed, start); len(got.Keys) != 1000 {
			t.Fatalf("List(1,000 entries behind) = %d keys, want 1,000", len(got.Keys))
		}
		appendKeys(1)
		if _, err := feed.List(context.Background(), start); !errors.Is(err, auth.ErrWholeList) {
			t.Errorf("List(1,001 entries behind) = %v, want ErrWholeList", err)
		}
		if got := list(t, feed, ""); len(got.Keys) != 1001 {
			t.Errorf("List(\"\") = %d keys, want 1,001", len(got.Keys))
		}
	})
}
