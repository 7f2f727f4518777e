package auth_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// feedSkew is the clock skew the fixture's feed allows verifiers.
const feedSkew = 30 * time.Second

func (f *fixture) feed() *auth.RevocationFeed {
	return auth.NewRevocationFeed(f.st, 15*time.Minute, feedSkew, f.clock.Now, slog.New(slog.DiscardHandler))
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
		// An old cursor is still a cursor: it reads what is still in force.
		checkIDs(t, "List(start) after the entries left", list(t, feed, start.Cursor).Sessions, nil)

		// A cursor older than the window reads the full list: here a key
		// revoked with a time after the cursor's but committed before it,
		// which a delta would not send again.
		f.clock.Set(until.Add(time.Hour))
		if err := f.st.AppendRevocation(ctx, store.RevokedKey, "kid-y", f.clock.Now().Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		old := list(t, feed, "").Cursor
		checkIDs(t, "List(cursor) with a fresh cursor", list(t, feed, old).Keys, nil)
		f.clock.Advance(15*time.Minute + feedSkew + time.Second)
		stale := list(t, feed, old)
		yUntil := until.Add(time.Hour + 10*time.Minute + 15*time.Minute + feedSkew)
		checkIDs(t, "List(cursor older than the window).Keys", stale.Keys, []auth.RevokedID{{ID: "kid-y", Until: yUntil}})
		if stale.Cursor == old {
			t.Errorf("List(cursor older than the window).Cursor = the old cursor, want a new one")
		}
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
		for _, c := range []string{
			"!!!", "cjE", b64([]byte("r1|1|")) + "=", b64([]byte("r2|1|1")), b64([]byte("r1|x|1")),
			b64([]byte("r1|-5|1")), b64([]byte("r1|" + now + "|not a position")), b64([]byte("r1|1")),
		} {
			_, err := feed.List(context.Background(), c)
			wantCode(t, "List("+c+")", err, "malformed_request")
		}
	})
}
