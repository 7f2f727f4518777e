package sqlstore_test

import (
	"context"
	"testing"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/store/storetest"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func open(t *testing.T, url string) *sqlstore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestSQLite(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) store.Store { return open(t, testdb.SQLite(t)) })
}

func TestPostgres(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) store.Store { return open(t, testdb.Postgres(t)) })
}
