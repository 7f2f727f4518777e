package sqlstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var _ store.RevocationQueries = (*queries)(nil)

func (q *queries) AppendRevocation(ctx context.Context, kind, id string, at time.Time) error {
	if kind != store.RevokedSession && kind != store.RevokedKey {
		return fmt.Errorf("sqlstore: revocation kind %q: want %q or %q", kind, store.RevokedSession, store.RevokedKey)
	}
	_, err := q.exec(ctx, `INSERT INTO revocations (kind, id, revoked_at) VALUES (?, ?, ?)`, kind, id, ts(at))
	return err
}

// revocationRow is one row of the feed query. Snapshot is PostgreSQL's
// snapshot of the read, on every row; Kind is "" on the row that carries
// only it.
type revocationRow struct {
	Snapshot string     `db:"snap"`
	Seq      int64      `db:"seq"`
	Kind     string     `db:"kind"`
	ID       string     `db:"id"`
	At       *time.Time `db:"at"`
}

// The feed query. The position is, on SQLite, the highest seq read: SQLite
// runs one write transaction at a time, so seq order is commit order. On
// PostgreSQL it is the snapshot of the read (pg_current_snapshot, the
// statement's own): a seq is drawn when a row is written, not when it
// commits, so a row with a lower seq can become visible after one with a
// higher; the rows a snapshot did not see are exactly those whose
// transaction it does not count as finished.
const (
	feedSessionsSQL = `SELECT 'session' AS kind, id, max_expires_at AS at, 0 AS seq FROM sessions
		WHERE revoked_at IS NULL AND max_expires_at > ? AND max_expires_at <= ?`

	feedSQLite = `SELECT '' AS snap, seq, kind, id, at FROM (
		SELECT kind, id, revoked_at AS at, seq FROM revocations WHERE seq > ? AND revoked_at > ?
		UNION ALL ` + feedSessionsSQL + `) ORDER BY seq = 0, seq, at, id LIMIT ?`

	feedPostgres = `SELECT snap.s::text AS snap, COALESCE(r.seq, 0) AS seq, COALESCE(r.kind, '') AS kind,
			COALESCE(r.id, '') AS id, r.at
		FROM (SELECT pg_current_snapshot() AS s) snap
		LEFT JOIN (
			SELECT kind, id, revoked_at AS at, seq FROM revocations
			WHERE revoked_at > ? AND txid >= pg_snapshot_xmin(?::text::pg_snapshot)
				AND NOT pg_visible_in_snapshot(txid, ?::text::pg_snapshot)
			UNION ALL ` + feedSessionsSQL + `
		) r ON true
		ORDER BY r.seq = 0, r.seq, r.at, r.id LIMIT ?`
)

// nothingSeen is the PostgreSQL snapshot before every transaction.
const nothingSeen = "1:1:"

func (q *queries) Revocations(ctx context.Context, after *store.RevocationMark, notBefore, now time.Time, limit int) ([]store.Revocation, store.RevocationMark, error) {
	rowLimit := int64(math.MaxInt64)
	if limit > 0 {
		// PostgreSQL's row for the snapshot alone comes only when no entry
		// does, so limit rows hold limit entries either way.
		rowLimit = int64(limit)
	}
	var mark store.RevocationMark
	position, since := "", notBefore
	if after != nil {
		position = after.Position
		if after.At.After(since) {
			since = after.At
		}
		mark = *after
	}
	if now.After(mark.At) {
		mark.At = now
	}
	var rows []revocationRow
	if q.dialect == Postgres {
		if position == "" {
			// A snapshot that counts no transaction as finished: every
			// row is after it.
			position = nothingSeen
		} else if err := checkSnapshot(position); err != nil {
			return nil, store.RevocationMark{}, err
		}
		if err := q.selectAll(ctx, &rows, feedPostgres, ts(notBefore), position, position,
			ts(since), ts(now), rowLimit); err != nil {
			return nil, store.RevocationMark{}, err
		}
	} else {
		var seq int64
		if position != "" {
			var err error
			if seq, err = strconv.ParseInt(position, 10, 64); err != nil || seq < 0 || strconv.FormatInt(seq, 10) != position {
				return nil, store.RevocationMark{}, fmt.Errorf("%w: %q is not a sequence number", store.ErrBadMark, position)
			}
		}
		if err := q.selectAll(ctx, &rows, feedSQLite, seq, ts(notBefore), ts(since), ts(now), rowLimit); err != nil {
			return nil, store.RevocationMark{}, err
		}
		mark.Position = strconv.FormatInt(seq, 10)
	}
	out := make([]store.Revocation, 0, len(rows))
	var maxSeq int64
	for _, r := range rows {
		if r.Snapshot != "" {
			mark.Position = r.Snapshot
		}
		if r.Kind == "" || r.At == nil {
			continue // PostgreSQL's row for the snapshot alone
		}
		out = append(out, store.Revocation{Kind: r.Kind, ID: r.ID, At: r.At.UTC()})
		maxSeq = max(maxSeq, r.Seq)
	}
	if q.dialect != Postgres {
		if cur, _ := strconv.ParseInt(mark.Position, 10, 64); maxSeq > cur {
			mark.Position = strconv.FormatInt(maxSeq, 10)
		}
	}
	return out, mark, nil
}

// checkSnapshot accepts what pg_snapshot's text form accepts ("xmin:xmax:"
// and then the transactions in progress, ascending, each in [xmin, xmax)),
// so that a forged position is ErrBadMark and never a database error.
func checkSnapshot(s string) error {
	bad := fmt.Errorf("%w: %q is not a snapshot", store.ErrBadMark, s)
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return bad
	}
	num := func(v string) (uint64, bool) {
		n, err := strconv.ParseUint(v, 10, 64)
		return n, err == nil && n > 0 && n < 1<<63 && strconv.FormatUint(n, 10) == v
	}
	xmin, ok1 := num(parts[0])
	xmax, ok2 := num(parts[1])
	if !ok1 || !ok2 || xmin > xmax {
		return bad
	}
	if parts[2] == "" {
		return nil
	}
	last := xmin
	for _, v := range strings.Split(parts[2], ",") {
		x, ok := num(v)
		if !ok || x < last || x >= xmax {
			return bad
		}
		last = x
	}
	return nil
}

func (q *queries) PruneRevocations(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := q.exec(ctx, `DELETE FROM revocations WHERE seq IN (
		SELECT seq FROM revocations WHERE revoked_at < ? ORDER BY revoked_at, seq LIMIT ?)`, ts(before), limit)
	return int(n), err
}
