// Package testdb owns the real databases tests run against: a fresh SQLite
// file per test, and a fresh PostgreSQL database per test on the server
// named by PALISADE_TEST_POSTGRES (default the local server, user postgres).
//
// PostgreSQL being unreachable skips the PostgreSQL tests loudly on a
// laptop, and fails them under CI=true: CI must never pass without them.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver for the admin connection
)

// EnvPostgres names the environment variable holding the admin URL of the
// PostgreSQL server tests create their databases on.
const EnvPostgres = "PALISADE_TEST_POSTGRES"

// DefaultPostgres is the server CI machines provide.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// SQLite returns the URL of a new, empty SQLite database in a directory the
// test removes.
func SQLite(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
}

// Postgres returns the URL of a new, empty PostgreSQL database that is
// dropped when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := AdminURL()
	if err := Probe(); err != nil {
		if CIRequired() {
			t.Fatalf("PostgreSQL at %s is unreachable and CI=true requires it: %v", redact(admin), err)
		}
		t.Skipf("PostgreSQL SUITE SKIPPED: %s is unreachable (%v); set %s or start a server", redact(admin), err, EnvPostgres)
	}
	db, err := sql.Open("postgres", admin)
	if err != nil {
		t.Fatalf("open admin connection: %v", err)
	}
	defer db.Close()
	name := "palisade_test_" + randomSuffix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("postgres", admin)
		if err != nil {
			t.Errorf("open admin connection for cleanup: %v", err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a test that failed half-way may still hold connections.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	u.Path = "/" + name
	return u.String()
}

// AdminURL is the PostgreSQL server tests use.
func AdminURL() string {
	if v := os.Getenv(EnvPostgres); v != "" {
		return v
	}
	return DefaultPostgres
}

// CIRequired reports whether an unreachable PostgreSQL is a failure.
func CIRequired() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

var probe struct {
	once sync.Once
	err  error
}

// Probe reports whether the PostgreSQL server answers; it asks once per
// process.
func Probe() error {
	probe.once.Do(func() {
		db, err := sql.Open("postgres", AdminURL())
		if err != nil {
			probe.err = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		probe.err = db.PingContext(ctx)
	})
	return probe.err
}

func randomSuffix(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random database name: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// redact drops a password from a URL before it is printed.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Describe says where the PostgreSQL suite runs, for banners.
func Describe() string { return fmt.Sprintf("PostgreSQL at %s", redact(AdminURL())) }

// Exec runs one statement on the PostgreSQL database at url: for tests and
// benchmarks that set up what the application never would.
func Exec(t testing.TB, url, stmt string) {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", redact(url), err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("testdb: %s: %v", stmt, err)
	}
}

// LockTable locks table in the PostgreSQL database at url (ACCESS
// EXCLUSIVE, as a migration or VACUUM FULL would) until release is called
// or the test ends: every statement that touches it waits meanwhile.
func LockTable(t testing.TB, url, table string) (release func()) {
	t.Helper()
	return Hold(t, url, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE")
}

// Hold runs stmt (a LOCK TABLE, a SELECT ... FOR SHARE) in a transaction
// of the PostgreSQL database at url, and holds the transaction, with the
// locks stmt took, until release is called or the test ends.
func Hold(t testing.TB, url, stmt string, args ...any) (release func()) {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", redact(url), err)
	}
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		db.Close()
		t.Fatalf("testdb: begin: %v", err)
	}
	release = func() {
		_ = tx.Rollback()
		db.Close()
	}
	t.Cleanup(release)
	if _, err := tx.Exec(stmt, args...); err != nil {
		t.Fatalf("testdb: %s: %v", stmt, err)
	}
	return release
}

// LockWaiting is a store that reports how many of its operations wait for
// a lock another transaction holds (sqlstore.Store.LockWaiters).
type LockWaiting interface {
	LockWaiters(ctx context.Context) (int, error)
}

// WaitLockWaiters returns once at least n operations of st wait for a
// lock: a racing operation has reached the database and queued, which a
// test knows from the database rather than by sleeping. It polls; the
// minute's deadline is a guard against a hang, not a timing assumption.
func WaitLockWaiters(t testing.TB, st LockWaiting, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := st.LockWaiters(context.Background())
		if err != nil {
			t.Fatalf("testdb: LockWaiters: %v", err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: %d operations wait for a lock after a minute, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
