// Package sqlstore owns the SQL implementation of the store contract, over
// PostgreSQL (lib/pq) and SQLite (modernc.org/sqlite, pure Go). The two
// dialects share every query; where SQL must differ the difference sits next
// to the query, guarded by the dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"golang.org/x/sync/singleflight"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/palisade-auth/palisade/internal/store"
)

// Dialects.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Store is a store.Store over one database.
type Store struct {
	queries
	db   *sqlx.DB
	path string // the SQLite file; "" on PostgreSQL
}

var _ store.Store = (*Store)(nil)

// queries runs the contract's operations on a connection pool or on one
// transaction; inTx says which.
type queries struct {
	dialect string
	tx      *sqlx.Tx // nil outside a transaction
	db      *sqlx.DB
	sql     *sync.Map           // query as written -> query rebound for the dialect
	stmts   *sync.Map           // rebound query -> *sqlx.Stmt prepared on the pool
	caching *singleflight.Group // one background prepare (cache) a query at a time
	// beginning counts transactions waiting to begin: on SQLite, where
	// BEGIN IMMEDIATE takes the write lock, they wait for a writer.
	beginning *atomic.Int64
}

var _ store.Queries = (*queries)(nil)

// Open connects to url: "postgres://…" (or "postgresql://…") or
// "sqlite:PATH". The SQLite file and its directory are created when missing.
// Migrations are not applied; call Migrate.
func Open(ctx context.Context, url string) (*Store, error) {
	dialect, driver, dsn, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if dialect == SQLite {
		if err := os.MkdirAll(filepath.Dir(sqlitePath(url)), 0o700); err != nil {
			return nil, fmt.Errorf("sqlstore: create database directory: %w", err)
		}
	}
	var db *sqlx.DB
	if dialect == Postgres {
		c, err := pq.NewConnector(dsn)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: open: %w", err)
		}
		c.Dialer(newPGDialer())
		db = sqlx.NewDb(sql.OpenDB(c), driver)
	} else if db, err = sqlx.Open(driver, dsn); err != nil {
		return nil, fmt.Errorf("sqlstore: open: %w", err)
	}
	if dialect == SQLite {
		// One writer at a time is SQLite's model; a small pool serves
		// concurrent readers under WAL without piling up page caches.
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
	} else {
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: connect to %s database: %w", dialect, err)
	}
	s := &Store{db: db}
	if dialect == SQLite {
		s.path = sqlitePath(url)
	}
	s.queries = queries{dialect: dialect, db: db, sql: new(sync.Map), stmts: new(sync.Map), caching: new(singleflight.Group), beginning: new(atomic.Int64)}
	return s, nil
}

// parseURL maps the operator's database URL to a driver and its DSN.
func parseURL(url string) (dialect, driver, dsn string, err error) {
	switch store.DialectOf(url) {
	case store.Postgres:
		return Postgres, "postgres", withConnectTimeout(withBinaryParameters(url)), nil
	case store.SQLite:
		path := sqlitePath(url)
		if path == "" || strings.Contains(path, "?") || path == ":memory:" {
			return "", "", "", fmt.Errorf("sqlstore: %q: want sqlite:PATH to a file", url)
		}
		// WAL lets readers run beside the writer; busy_timeout makes
		// writers queue instead of failing; _txlock=immediate takes the
		// write lock at BEGIN, so a transaction never fails half-way when
		// it upgrades from reading to writing.
		q := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
			"&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite"
		return SQLite, "sqlite", "file:" + path + "?" + q, nil
	}
	return "", "", "", fmt.Errorf("sqlstore: database URL must start with %s", store.URLSchemes)
}

// withBinaryParameters turns on lib/pq's binary_parameters unless the
// operator chose otherwise: it sends a statement with its arguments in one
// round trip instead of two (prepare, then execute), which halves the
// latency of every query.
func withBinaryParameters(url string) string {
	if strings.Contains(url, "binary_parameters=") {
		return url
	}
	if strings.Contains(url, "?") {
		return url + "&binary_parameters=yes"
	}
	return url + "?binary_parameters=yes"
}

// defaultConnectTimeout is the connect_timeout (in seconds) a PostgreSQL
// URL gets unless it sets one or PGCONNECT_TIMEOUT is set. lib/pq applies it
// to the whole of opening a connection, the TCP connect and the startup
// handshake; without it a host that drops packets, or accepts and never
// answers, holds every request that needs a new connection for as long as
// the operating system's TCP timeouts (minutes) instead of failing it as
// unavailable. Requests carry no deadline of their own (a context deadline
// would not help: lib/pq ignores the context during the handshake and only
// sends a cancel request for a statement in flight), and a request waiting
// for a pooled connection gets a failed connect's error as soon as it
// happens, so this bound is also how long a request waits for the pool
// while the database cannot be reached. Five seconds is ample for a
// handshake with a database that answers, TLS included.
const defaultConnectTimeout = "5"

// withConnectTimeout adds connect_timeout=defaultConnectTimeout unless the
// operator chose one, in the URL or with PGCONNECT_TIMEOUT (which lib/pq
// reads, and which a URL parameter would override).
func withConnectTimeout(dsn string) string {
	if hasParam(dsn, "connect_timeout") {
		return dsn
	}
	if _, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		return dsn
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&connect_timeout=" + defaultConnectTimeout
	}
	return dsn + "?connect_timeout=" + defaultConnectTimeout
}

// hasParam reports whether the URL dsn sets the query parameter name.
func hasParam(dsn, name string) bool {
	u, err := neturl.Parse(dsn)
	if err != nil {
		// lib/pq will refuse it; the parameter does not matter.
		return strings.Contains(dsn, name+"=")
	}
	return u.Query().Has(name)
}

func sqlitePath(url string) string {
	p := strings.TrimPrefix(url, "sqlite:")
	return strings.TrimPrefix(p, "//")
}

// Dialect returns "postgres" or "sqlite".
func (s *Store) Dialect() string { return s.dialect }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close releases the prepared statements and the connections.
func (s *Store) Close() error {
	s.stmts.Range(func(_, v any) bool {
		v.(*sqlx.Stmt).Close()
		return true
	})
	return s.db.Close()
}

// InTx runs fn in one transaction.
func (s *Store) InTx(ctx context.Context, fn func(store.Queries) error) error {
	return s.queries.atomic(ctx, func(q *queries) error { return fn(q) })
}

// atomic runs fn in a transaction, or directly when q already is one, so
// that multi-statement operations are atomic on their own and compose
// inside InTx.
func (q *queries) atomic(ctx context.Context, fn func(*queries) error) (err error) {
	if q.tx != nil {
		return fn(q)
	}
	q.beginning.Add(1)
	tx, err := q.db.BeginTxx(ctx, nil)
	q.beginning.Add(-1)
	if err != nil {
		return mapCtxErr(ctx, err)
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(&queries{dialect: q.dialect, tx: tx, db: q.db, sql: q.sql, stmts: q.stmts, caching: q.caching, beginning: q.beginning}); err != nil {
		tx.Rollback()
		return err
	}
	return mapCtxErr(ctx, tx.Commit())
}

// q rebinds a query written with ? placeholders for the dialect, once.
func (q *queries) q(query string) string {
	if v, ok := q.sql.Load(query); ok {
		return v.(string)
	}
	bound := sqlx.Rebind(sqlx.BindType(q.driverName()), query)
	q.sql.Store(query, bound)
	return bound
}

func (q *queries) driverName() string {
	if q.dialect == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// forUpdate is the row lock PostgreSQL needs; SQLite transactions already
// hold the database write lock from BEGIN IMMEDIATE.
func (q *queries) forUpdate() string {
	if q.dialect == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// stmt returns query prepared: once per connection of the pool, then
// reused, so the database parses and plans each query once instead of on
// every call. Inside a transaction the statement is bound to it.
func (q *queries) stmt(ctx context.Context, query string) (*sqlx.Stmt, error) {
	bound := q.q(query)
	var st *sqlx.Stmt
	if v, ok := q.stmts.Load(bound); ok {
		st = v.(*sqlx.Stmt)
	} else if q.tx != nil {
		// Prepared on the pool, it would need a second connection while
		// the transaction holds one: with every connection held by
		// transactions queued on one user's row lock, the one holding the
		// lock waited for a connection, and 100 concurrent logins to one
		// account on a fresh replica stalled for 30 s. So it is prepared
		// on the transaction's own, and on the pool in the background for
		// the next use.
		go q.cache(bound)
		prepared, err := q.tx.PreparexContext(ctx, bound)
		return prepared, mapCtxErr(ctx, err)
	} else {
		prepared, err := q.db.PreparexContext(ctx, bound)
		if err != nil {
			return nil, mapCtxErr(ctx, err)
		}
		v, loaded := q.stmts.LoadOrStore(bound, prepared)
		if loaded {
			prepared.Close()
		}
		st = v.(*sqlx.Stmt)
	}
	if q.tx != nil {
		return q.tx.StmtxContext(ctx, st), nil
	}
	return st, nil
}

// cache prepares query on the pool for stmt, unless it already is or
// another cache call is preparing it: the transactions of a fresh replica
// ask for the same statements at once.
func (q *queries) cache(query string) {
	_, _, _ = q.caching.Do(query, func() (any, error) {
		if _, ok := q.stmts.Load(query); ok {
			return nil, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prepared, err := q.db.PreparexContext(ctx, query)
		if err != nil {
			return nil, err // the next use outside a transaction prepares it, and says why it failed
		}
		if _, loaded := q.stmts.LoadOrStore(query, prepared); loaded {
			prepared.Close()
		}
		return nil, nil
	})
}

// ext is where a query runs: the transaction, or the pool.
func (q *queries) ext() sqlx.ExtContext {
	if q.tx != nil {
		return q.tx
	}
	return q.db
}

// PostgreSQL gets prepared statements. SQLite does not: a cached statement
// that has been stepped keeps its connection's read snapshot open, and a
// later write on that connection then fails with SQLITE_BUSY instead of
// waiting; parsing is cheap there anyway.

func (q *queries) get(ctx context.Context, dest any, query string, args ...any) error {
	if q.dialect != Postgres {
		return mapCtxErr(ctx, sqlx.GetContext(ctx, q.ext(), dest, q.q(query), args...))
	}
	st, err := q.stmt(ctx, query)
	if err != nil {
		return err
	}
	return mapCtxErr(ctx, st.GetContext(ctx, dest, args...))
}

func (q *queries) selectAll(ctx context.Context, dest any, query string, args ...any) error {
	if q.dialect != Postgres {
		return mapCtxErr(ctx, sqlx.SelectContext(ctx, q.ext(), dest, q.q(query), args...))
	}
	st, err := q.stmt(ctx, query)
	if err != nil {
		return err
	}
	return mapCtxErr(ctx, st.SelectContext(ctx, dest, args...))
}

func (q *queries) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if q.dialect != Postgres {
		res, err = q.ext().ExecContext(ctx, q.q(query), args...)
	} else {
		var st *sqlx.Stmt
		if st, err = q.stmt(ctx, query); err != nil {
			return 0, err
		}
		res, err = st.ExecContext(ctx, args...)
	}
	if err != nil {
		return 0, mapCtxErr(ctx, err)
	}
	n, err := res.RowsAffected()
	return n, mapErr(err)
}

// mapErr turns driver errors into the store's sentinels. It is the only
// place that knows driver error codes.
// mapCtxErr is mapErr for a call made under ctx: PostgreSQL's answer
// to the cancel lib/pq sends when ctx ends (57014, "canceling statement
// due to user request") is ctx's error, so that a request whose client
// hung up while it waited for a lock is told from a fault (it was answered
// 500 and logged as a failure).
func mapCtxErr(ctx context.Context, err error) error {
	var pqErr *pq.Error
	if ctxErr := ctx.Err(); ctxErr != nil && errors.As(err, &pqErr) && pqErr.Code == "57014" {
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	return mapErr(err)
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		return fmt.Errorf("%w: %w", store.ErrAlreadyExists, err)
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrAlreadyExists, err)
		}
	}
	return fmt.Errorf("sqlstore: %w", err)
}

// unreachable reports whether err says the database cannot be reached or is
// not serving, rather than that it refused this statement: the connection
// was refused, reset or dropped (database/sql and lib/pq report a dropped
// connection as driver.ErrBadConn, io.EOF or a net.Error), the server is
// shutting down or starting up (SQLSTATE class 08, 57P01-57P03), or a dial
// or the wait for a pooled connection timed out. On SQLite the file is
// the server: the write lock still held by another connection when
// busy_timeout ran out (SQLITE_BUSY), the disk failing or full
// (SQLITE_IOERR, SQLITE_FULL) or the file out of reach (SQLITE_CANTOPEN)
// are conditions a retry may pass; a damaged file (SQLITE_CORRUPT,
// SQLITE_NOTADB) or a statement's own fault is not. A client that went
// away (context.Canceled) is not an outage.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		// Also when a dial was cut short by it: that error is a net.Error.
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return pqErr.Code.Class() == "08" // connection_exception
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() & 0xff { // the primary code of an extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN:
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// ts is how every time enters the database: UTC, so SQLite's text times
// sort in time order, and microseconds, PostgreSQL's precision, so a value
// read back equals the value written on both.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func tsp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := ts(*t)
	return &v
}
