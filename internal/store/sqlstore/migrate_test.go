package sqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func TestOpenRefusesBadURLs(t *testing.T) {
	for _, url := range []string{"", "mysql://x", "sqlite:", "sqlite::memory:", "sqlite:/tmp/x.db?mode=ro"} {
		t.Run(url, func(t *testing.T) {
			if s, err := sqlstore.Open(context.Background(), url); err == nil {
				s.Close()
				t.Fatalf("Open(%q) = nil error, want one", url)
			}
		})
	}
}

func TestMigrations(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url := tc.url(t)
			s, err := sqlstore.Open(ctx, url)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			before, err := s.MigrationStatus(ctx)
			if err != nil {
				t.Fatalf("MigrationStatus: %v", err)
			}
			if len(before) == 0 || before[0].Applied {
				t.Fatalf("MigrationStatus before Migrate = %+v, want pending migrations", before)
			}
			// Replicas start together: concurrent Migrate calls must all
			// succeed and apply each migration once.
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					other, err := sqlstore.Open(ctx, url)
					if err != nil {
						errs[i] = err
						return
					}
					defer other.Close()
					errs[i] = other.Migrate(ctx)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent Migrate: %v", err)
			}
			after, err := s.MigrationStatus(ctx)
			if err != nil {
				t.Fatalf("MigrationStatus: %v", err)
			}
			for _, m := range after {
				if !m.Applied || m.AppliedAt.IsZero() {
					t.Errorf("migration %d %s: applied %v at %v, want applied", m.Version, m.Name, m.Applied, m.AppliedAt)
				}
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("second Migrate: %v", err)
			}
			// The schema is usable: a write and a read round-trip.
			now := time.Now().UTC().Truncate(time.Microsecond)
			u := store.User{ID: "u1", Email: "A@example.com", EmailNormalized: "a@example.com", PasswordHash: "h",
				Role: "user", Status: store.StatusEnabled, CreatedAt: now, UpdatedAt: now}
			if err := s.CreateUser(ctx, u); err != nil {
				t.Fatalf("CreateUser: %v", err)
			}
			got, err := s.UserByEmail(ctx, "a@example.com")
			if err != nil || got.ID != "u1" || !got.CreatedAt.Equal(now) {
				t.Fatalf("UserByEmail = %+v, %v; want u1 created at %v", got, err, now)
			}
		})
	}
}
