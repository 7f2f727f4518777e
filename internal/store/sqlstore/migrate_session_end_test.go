package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestMigrationSessionEnd: migration 00005 gives every session opened
// before it an absolute end 90 days after its login, and caps the expiry of
// the session and of its refresh tokens at that end, so a session older
// than 90 days can no longer be refreshed.
func TestMigrationSessionEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := sqlstore.Open(ctx, tc.url(t))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if err := s.MigrateUpTo(ctx, 4); err != nil {
				t.Fatalf("MigrateUpTo(4): %v", err)
			}
			now := time.Date(2026, time.November, 23, 20, 1, 2, 345678000, time.UTC)
			u := store.User{ID: "u1", Email: "a@example.com", EmailNormalized: "a@example.com", PasswordHash: "h",
				Role: "user", Status: store.StatusEnabled, CreatedAt: now.Add(-200 * 24 * time.Hour), UpdatedAt: now}
			if err := s.CreateUser(ctx, u); err != nil {
				t.Fatalf("CreateUser: %v", err)
			}
			day := 24 * time.Hour
			type legacy struct {
				id               string
				created, expires time.Time
				wantEnd          time.Time
				wantExpires      time.Time
			}
			sessions := []legacy{
				// Refreshed for 100 days: its end passed 10 days ago.
				{"old", now.Add(-100 * day), now.Add(10 * day), now.Add(-10 * day), now.Add(-10 * day)},
				// A day old: its end is 89 days away, its expiry stays.
				{"young", now.Add(-day), now.Add(13 * day), now.Add(89 * day), now.Add(13 * day)},
			}
			for _, l := range sessions {
				if err := s.Exec(ctx, `INSERT INTO sessions (id, user_id, device_id, created_at, last_used_at, expires_at)
					VALUES (?, ?, ?, ?, ?, ?)`, l.id, u.ID, "device-"+l.id, l.created, now, l.expires); err != nil {
					t.Fatalf("insert session %s: %v", l.id, err)
				}
				if err := s.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, session_id, user_id, parent_hash, issued_at, expires_at)
					VALUES (?, ?, ?, '', ?, ?)`, "hash-"+l.id, l.id, u.ID, now, l.expires); err != nil {
					t.Fatalf("insert token %s: %v", l.id, err)
				}
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			for _, l := range sessions {
				sess, err := s.SessionByID(ctx, l.id)
				if err != nil {
					t.Fatalf("SessionByID(%s) = %v", l.id, err)
				}
				if !sess.MaxExpiresAt.Equal(l.wantEnd) || !sess.ExpiresAt.Equal(l.wantExpires) {
					t.Errorf("session %s after the migration: ends %v, expires %v; want %v, %v",
						l.id, sess.MaxExpiresAt, sess.ExpiresAt, l.wantEnd, l.wantExpires)
				}
				tok, err := s.RefreshTokenByHash(ctx, "hash-"+l.id)
				if err != nil || !tok.ExpiresAt.Equal(l.wantExpires) {
					t.Errorf("token of %s after the migration: expires %v, %v; want %v", l.id, tok.ExpiresAt, err, l.wantExpires)
				}
			}
			next := store.RefreshToken{Hash: "hash-next", IssuedAt: now, ExpiresAt: now.Add(14 * day)}
			if _, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: "hash-old", Next: next, Now: now}); !errors.Is(err, store.ErrPrecondition) {
				t.Errorf("RotateRefreshToken(session past its end) = %v, want ErrPrecondition", err)
			}
			rot, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: "hash-young", Next: next, Now: now})
			if err != nil || !rot.NextExpiresAt.Equal(now.Add(14*day)) {
				t.Errorf("RotateRefreshToken(young session) = expiry %v, %v; want %v", rot.NextExpiresAt, err, now.Add(14*day))
			}
		})
	}
}
