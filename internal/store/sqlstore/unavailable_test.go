package sqlstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestMapErrUnavailable(t *testing.T) {
	addr := closedPort(t)
	_, dialErr := net.DialTimeout("tcp", addr, 5*time.Second)
	if dialErr == nil {
		t.Fatalf("dial %s: connected to a closed port", addr)
	}
	db, err := sql.Open("postgres", "postgres://postgres@"+addr+"/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pqDialErr := db.PingContext(context.Background())
	if pqDialErr == nil {
		t.Fatalf("ping %s: no error from a closed port", addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A dial the request's own cancellation cut short is a net.Error too.
	_, dialCanceled := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if dialCanceled == nil {
		t.Fatalf("dial %s with a canceled context: no error", addr)
	}
	pqConnector, err := pq.NewConnector("postgres://postgres@" + addr + "/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	_, pqDialCanceled := pqConnector.Connect(ctx)
	if pqDialCanceled == nil {
		t.Fatalf("pq connect to %s with a canceled context: no error", addr)
	}

	for _, tc := range []struct {
		name string
		err  error
		want error // the sentinel, or nil for none
	}{
		{"dial refused", dialErr, store.ErrUnavailable},
		{"pq dial refused", pqDialErr, store.ErrUnavailable},
		{"wrapped net error", fmt.Errorf("query: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}), store.ErrUnavailable},
		{"EOF", io.EOF, store.ErrUnavailable},
		{"unexpected EOF", io.ErrUnexpectedEOF, store.ErrUnavailable},
		{"bad connection", driver.ErrBadConn, store.ErrUnavailable},
		{"pool wait timed out", context.DeadlineExceeded, store.ErrUnavailable},
		{"08006 connection failure", &pq.Error{Code: "08006", Severity: "FATAL"}, store.ErrUnavailable},
		{"08001 cannot connect", &pq.Error{Code: "08001", Severity: "FATAL"}, store.ErrUnavailable},
		{"57P01 admin shutdown", &pq.Error{Code: "57P01", Severity: "FATAL"}, store.ErrUnavailable},
		{"57P02 crash shutdown", &pq.Error{Code: "57P02", Severity: "FATAL"}, store.ErrUnavailable},
		{"57P03 starting up", &pq.Error{Code: "57P03", Severity: "FATAL"}, store.ErrUnavailable},
		{"unique violation", &pq.Error{Code: "23505", Severity: "ERROR"}, store.ErrAlreadyExists},
		{"no rows", sql.ErrNoRows, store.ErrNotFound},
		{"undefined table", &pq.Error{Code: "42P01", Severity: "ERROR"}, nil},
		{"57014 query canceled", &pq.Error{Code: "57014", Severity: "ERROR"}, nil},
		{"client went away", ctx.Err(), nil},
		{"client went away during a dial", dialCanceled, nil},
		{"client went away during a pq dial", pqDialCanceled, nil},
		{"other", errors.New("boom"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sqlstore.MapErr(tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("MapErr(%v) = %v, want it to wrap the driver error", tc.err, got)
			}
			for _, s := range []error{store.ErrUnavailable, store.ErrAlreadyExists, store.ErrNotFound} {
				if is, want := errors.Is(got, s), s == tc.want; is != want {
					t.Errorf("errors.Is(MapErr(%v), %v) = %t, want %t", tc.err, s, is, want)
				}
			}
		})
	}
}

// TestTerminatedConnectionIsUnavailable drops the connection of an open
// transaction on the server's side, as a restart does, and checks that the
// store reports the outage as ErrUnavailable and that the next call, on a
// fresh connection, works.
func TestTerminatedConnectionIsUnavailable(t *testing.T) {
	url := testdb.Postgres(t)
	st := testdb.Store(t, url)
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()

	err = st.InTx(ctx, func(q store.Queries) error {
		if _, err := q.UserByID(ctx, "no-such-user"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("first read: %w", err)
		}
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
			t.Fatalf("terminate the store's connections: %v", err)
		}
		_, err := q.UserByID(ctx, "no-such-user")
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("InTx(read after the connection was terminated) = %v, want %v", err, store.ErrUnavailable)
	}
	if _, err := st.UserByID(ctx, "no-such-user"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UserByID after the outage = %v, want %v", err, store.ErrNotFound)
	}
}

// TestMapErrSQLite classifies errors that SQLite itself returned: what a
// retry may pass (the write lock held past busy_timeout, the disk failing
// or full, the file out of reach) is unavailable; a damaged file or a
// statement's own fault is not.
func TestMapErrSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(name, params string) *sql.DB {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+name+params)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	exec := func(db *sql.DB, query string) error {
		_, err := db.ExecContext(ctx, query)
		return err
	}

	// Another connection holds the write lock; busy_timeout(0) gives up at
	// once instead of after the store's ten seconds.
	locked := open(filepath.Join(dir, "locked.db"), "?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)&_txlock=immediate")
	holder, err := locked.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	_, busy := locked.BeginTx(ctx, nil)

	// A directory where the write-ahead log must go: the disk fails.
	if err := os.Mkdir(filepath.Join(dir, "ioerr.db-wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	ioErr := exec(open(filepath.Join(dir, "ioerr.db"), "?_pragma=journal_mode(WAL)"), "CREATE TABLE t (a)")
	cantOpen := exec(open(filepath.Join(dir, "no-such-dir", "x.db"), ""), "CREATE TABLE t (a)")
	notADB := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notADB, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	notADBErr := exec(open(notADB, ""), "CREATE TABLE t (a)")
	db := open(filepath.Join(dir, "ok.db"), "")
	if err := exec(db, "CREATE TABLE t (a PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(db, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	unique := exec(db, "INSERT INTO t VALUES (1)")
	syntax := exec(db, "SELEKT 1")

	cases := []struct {
		name string
		err  error
		want error // the sentinel, or nil for none
	}{
		{"busy: lock held past busy_timeout", busy, store.ErrUnavailable},
		{"disk I/O error", ioErr, store.ErrUnavailable},
		{"cannot open the file", cantOpen, store.ErrUnavailable},
		{"not a database", notADBErr, nil},
		{"unique violation", unique, store.ErrAlreadyExists},
		{"syntax error", syntax, nil},
	}
	// Writing to /dev/full fails as a full disk does.
	if _, err := os.Stat("/dev/full"); err == nil {
		cases = append(cases, struct {
			name string
			err  error
			want error
		}{"disk full", exec(open("/dev/full", ""), "CREATE TABLE t (a)"), store.ErrUnavailable})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("SQLite returned no error; the case proves nothing")
			}
			got := sqlstore.MapErr(tc.err)
			for _, s := range []error{store.ErrUnavailable, store.ErrAlreadyExists, store.ErrNotFound} {
				if is, want := errors.Is(got, s), s == tc.want; is != want {
					t.Errorf("errors.Is(MapErr(%v), %v) = %t, want %t", tc.err, s, is, want)
				}
			}
		})
	}
}

// A statement cancelled because its context ended (a client that hung up
// while the request waited for a lock) fails with the context's error,
// not PostgreSQL's "canceling statement due to user request", which the
// API answered 500 and logged as a failure.
func TestCancelledStatementIsTheContexts(t *testing.T) {
	url := testdb.Postgres(t)
	st := testdb.Store(t, url)
	testdb.Hold(t, url, "LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := st.UserByID(ctx, "01a2131d-4901-7d37-bc70-e73180384996")
		done <- err
	}()
	testdb.WaitLockWaiters(t, st, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a read cancelled while it waited for a lock = %v, want context.Canceled", err)
	}
}
