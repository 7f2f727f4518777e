package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
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
