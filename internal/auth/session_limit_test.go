package auth_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
)

// TestSessionLimit: a login past MaxSessionsPerUser revokes the user's
// least recently used session, never the new one: its refresh token is
// refused, it leaves the session list, it enters the revocation feed, and
// the audit says why. A login for a device the user has replaces that
// session and revokes nothing else.
func TestSessionLimit(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0, func(c *auth.Config) { c.MaxSessionsPerUser = 3 })
		ctx := context.Background()
		u := f.user(t, "limit@example.com")
		pairs := map[string]auth.TokenPair{}
		for _, dev := range []string{"a", "b", "c"} {
			pairs[dev] = f.login(t, "limit@example.com", dev)
			f.clock.Advance(time.Minute)
		}
		// a is used after b and c were opened: b is now the least recently used.
		next, err := f.svc.Refresh(ctx, pairs["a"].RefreshToken, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		pairs["a"] = next
		f.clock.Advance(time.Minute)
		pairs["c"] = f.login(t, "limit@example.com", "c") // replaces c: still 3
		f.clock.Advance(time.Minute)
		if evs := f.events(t, u.ID, auth.EventSessionRevoked); len(evs) != 1 || dataOf(t, evs[0])["reason"] != "replaced" {
			t.Fatalf("after a login for a known device the audit has %+v, want one session.revoked, replaced", evs)
		}

		pairs["d"] = f.login(t, "limit@example.com", "d")

		ss, err := f.svc.Sessions(ctx, u.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var devices []string
		for _, s := range ss {
			devices = append(devices, s.DeviceID)
		}
		slices.Sort(devices)
		if want := []string{"a", "c", "d"}; !slices.Equal(devices, want) {
			t.Fatalf("sessions after the 4th device = %v, want %v (b, the least recently used, revoked)", devices, want)
		}
		_, err = f.svc.Refresh(ctx, pairs["b"].RefreshToken, auth.Meta{})
		wantCode(t, "Refresh in the session the limit revoked", err, "refresh_token_revoked")
		for _, dev := range []string{"a", "c", "d"} {
			if _, err := f.svc.Refresh(ctx, pairs[dev].RefreshToken, auth.Meta{}); err != nil {
				t.Errorf("Refresh on kept device %s = %v, want a new pair", dev, err)
			}
		}
		evs := f.events(t, u.ID, auth.EventSessionRevoked)
		if len(evs) != 2 || evs[0].SessionID != pairs["b"].SessionID || dataOf(t, evs[0])["reason"] != "session_limit" {
			t.Fatalf("audit session.revoked = %+v, want the newest for b's session with reason session_limit", evs)
		}
		feed := auth.NewRevocationFeed(f.st, 15*time.Minute, time.Minute, f.sealer.DeriveSecret("revocation-cursor"), f.clock.Now, nil)
		list, err := feed.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list.Sessions, func(e auth.RevokedID) bool { return e.ID == pairs["b"].SessionID }) {
			t.Errorf("revocation feed %+v has no entry for the session the limit revoked", list.Sessions)
		}
	})
}
