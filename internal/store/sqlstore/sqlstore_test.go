package sqlstore_test

import (
	"testing"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/storetest"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func TestSQLite(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) store.Store { return testdb.Store(t, testdb.SQLite(t)) })
}

func TestPostgres(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) store.Store { return testdb.Store(t, testdb.Postgres(t)) })
}
