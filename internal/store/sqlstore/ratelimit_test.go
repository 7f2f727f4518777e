package sqlstore_test

import (
	"context"
	"testing"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/ratelimittest"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

var _ ratelimit.Store = (*sqlstore.Store)(nil)

func TestRateLimitSQLite(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return testdb.Store(t, testdb.SQLite(t)) })
}

func TestRateLimitPostgres(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return testdb.Store(t, testdb.Postgres(t)) })
}

// A store whose database is gone reports an error instead of an answer, so
// the limiter's failure policy decides.
func TestRateLimitClosedStore(t *testing.T) {
	s := testdb.Store(t, testdb.SQLite(t))
	s.Close()
	if _, _, err := s.TakeRateLimit(context.Background(), "k", 1, 1, 1); err == nil {
		t.Fatal("TakeRateLimit on a closed store: no error")
	}
}
