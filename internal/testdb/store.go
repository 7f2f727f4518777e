package testdb

import (
	"context"
	"testing"

	"github.com/palisade-auth/palisade/internal/store/sqlstore"
)

// Store opens the database at url with every migration applied; it is
// closed when the test ends. Opening the same url again, as another
// replica would, is fine: migrating is idempotent.
func Store(t testing.TB, url string) *sqlstore.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatalf("testdb: open the store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("testdb: migrate: %v", err)
	}
	return st
}
