package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/ratelimittest"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

var _ ratelimit.TATStore = (*sqlstore.Store)(nil)

func TestRateLimitSQLite(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return ratelimit.NewGCRA(testdb.Store(t, testdb.SQLite(t))) })
}

func TestRateLimitPostgres(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return ratelimit.NewGCRA(testdb.Store(t, testdb.Postgres(t))) })
}

// A store whose database is gone reports an error instead of an answer, so
// the limiter's failure policy decides.
func TestRateLimitClosedStore(t *testing.T) {
	s := testdb.Store(t, testdb.SQLite(t))
	s.Close()
	if _, _, _, err := s.TakeRateLimit(context.Background(), "k", 1, 1, 1); err == nil {
		t.Fatal("TakeRateLimit on a closed store: no error")
	}
}

// BenchmarkTakeRateLimitPostgres is the database store's cost per check:
// concurrent GCRA steps of distinct keys (4 per CPU, as a loaded issuer
// sends them), each its own statement and commit.
func BenchmarkTakeRateLimitPostgres(b *testing.B) {
	s := testdb.Store(b, testdb.Postgres(b))
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench-%d", n.Add(1))
		now := time.Now().UnixMicro()
		for pb.Next() {
			if _, _, _, err := s.TakeRateLimit(context.Background(), key, now, 1, 1<<40); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// The counters are not written ahead on PostgreSQL (migration 00010): a
// check's commit waits for no WAL flush.
func TestRateLimitsUnloggedPostgres(t *testing.T) {
	url := testdb.Postgres(t)
	testdb.Store(t, url)
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var persistence string
	if err := db.QueryRow(`SELECT relpersistence FROM pg_class WHERE relname = 'rate_limits'`).Scan(&persistence); err != nil {
		t.Fatal(err)
	}
	if persistence != "u" {
		t.Errorf("rate_limits relpersistence = %q, want \"u\" (unlogged)", persistence)
	}
}
