package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestSessionMaxLifetime: a session ends SessionMaxLifetime after its login
// however often it is refreshed. Refreshes before then work, each new
// refresh token expiring no later than the session (refresh_expires_in
// shrinks); the session list shows that end; at the end a refresh is
// refused as expired. The end is the session's own: a service configured
// otherwise later does not move it.
func TestSessionMaxLifetime(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		const ttl, lifetime = 24 * time.Hour, 36 * time.Hour
		f := newFixture(t, dbURL, 0, func(c *auth.Config) { c.RefreshTokenTTL, c.SessionMaxLifetime = ttl, lifetime })
		ctx := context.Background()
		u := f.user(t, "lifetime@example.com")
		start := f.clock.Now().UTC()
		end := start.Add(lifetime)

		p := f.login(t, "lifetime@example.com", "laptop")
		if p.RefreshExpiresIn != ttl {
			t.Errorf("Login().RefreshExpiresIn = %v, want the refresh TTL %v", p.RefreshExpiresIn, ttl)
		}
		for _, step := range []struct {
			advance time.Duration
			want    time.Duration // refresh_expires_in
		}{
			{time.Hour, ttl},                // end still more than a TTL away
			{11 * time.Hour, ttl},           // exactly a TTL before the end
			{8 * time.Hour, 16 * time.Hour}, // capped: 16h of the session are left
			{10 * time.Hour, 6 * time.Hour},
		} {
			f.clock.Advance(step.advance)
			now := f.clock.Now()
			next, err := f.svc.Refresh(ctx, p.RefreshToken, auth.Meta{})
			if err != nil {
				t.Fatalf("Refresh at login+%v = %v, want a new pair", now.Sub(start), err)
			}
			if next.RefreshExpiresIn != step.want {
				t.Errorf("Refresh at login+%v: RefreshExpiresIn = %v, want %v", now.Sub(start), next.RefreshExpiresIn, step.want)
			}
			ss, err := f.svc.Sessions(ctx, u.ID, "")
			if err != nil || len(ss) != 1 {
				t.Fatalf("Sessions at login+%v = %d, %v; want 1 session", now.Sub(start), len(ss), err)
			}
			if want := now.Add(step.want); !ss[0].ExpiresAt.Equal(want) || !ss[0].MaxExpiresAt.Equal(end) {
				t.Errorf("Sessions at login+%v: expires %v, ends %v; want %v, %v", now.Sub(start), ss[0].ExpiresAt, ss[0].MaxExpiresAt, want, end)
			}
			p = next
		}

		// A restart with a longer lifetime moves no existing session's end.
		longer := f.cfg
		longer.SessionMaxLifetime = 1000 * time.Hour
		svc := auth.New(f.deps, longer)
		f.clock.Advance(5 * time.Hour) // an hour before the end
		next, err := svc.Refresh(ctx, p.RefreshToken, auth.Meta{})
		if err != nil {
			t.Fatalf("Refresh an hour before the end = %v, want a new pair", err)
		}
		if next.RefreshExpiresIn != time.Hour {
			t.Errorf("Refresh an hour before the end, lifetime since raised: RefreshExpiresIn = %v, want 1h", next.RefreshExpiresIn)
		}

		f.clock.Advance(time.Hour) // the end
		_, err = svc.Refresh(ctx, next.RefreshToken, auth.Meta{})
		wantCode(t, "Refresh at the session's end", err, "refresh_token_expired")
		if ss, err := f.svc.Sessions(ctx, u.ID, ""); err != nil || len(ss) != 0 {
			t.Errorf("Sessions at the end = %d, %v; want none", len(ss), err)
		}
		// A new login is a new session, with a new end.
		if p := f.login(t, "lifetime@example.com", "laptop"); p.RefreshExpiresIn != ttl {
			t.Errorf("Login after the end: RefreshExpiresIn = %v, want %v", p.RefreshExpiresIn, ttl)
		}
	})
}

// TestSessionMaxLifetimeShorterThanTheTTL: when the lifetime is shorter
// than the refresh TTL, the login's own token already ends with it.
func TestSessionMaxLifetimeShorterThanTheTTL(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0, func(c *auth.Config) { c.RefreshTokenTTL, c.SessionMaxLifetime = 24*time.Hour, 3*time.Second })
	ctx := context.Background()
	f.user(t, "short@example.com")
	p := f.login(t, "short@example.com", "")
	if p.RefreshExpiresIn != 3*time.Second {
		t.Errorf("Login().RefreshExpiresIn = %v, want 3s", p.RefreshExpiresIn)
	}
	f.clock.Advance(2 * time.Second)
	next, err := f.svc.Refresh(ctx, p.RefreshToken, auth.Meta{})
	if err != nil || next.RefreshExpiresIn != time.Second {
		t.Fatalf("Refresh after 2s = %v, %v; want 1s left", next.RefreshExpiresIn, err)
	}
	f.clock.Advance(time.Second)
	_, err = f.svc.Refresh(ctx, next.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh after 3s", err, "refresh_token_expired")
}
