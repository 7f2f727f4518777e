package sqlstore

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const idemColumns = `scope, idem_key, request_hash, status, body, created_at`

func (q *queries) ReserveIdempotencyKey(ctx context.Context, r store.IdempotencyRecord, notBefore time.Time) (found store.IdempotencyRecord, err error) {
	err = q.atomic(ctx, func(q *queries) error {
		if _, err := q.exec(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND idem_key = ? AND created_at < ?`,
			r.Scope, r.Key, ts(notBefore)); err != nil {
			return err
		}
		// ON CONFLICT DO NOTHING rather than a unique violation: on
		// PostgreSQL a failed statement would poison the transaction.
		n, err := q.exec(ctx, `INSERT INTO idempotency_keys (`+idemColumns+`) VALUES (?, ?, ?, 0, NULL, ?)
			ON CONFLICT (scope, idem_key) DO NOTHING`, r.Scope, r.Key, r.RequestHash, ts(r.CreatedAt))
		if err != nil || n == 1 {
			return err
		}
		if err := q.get(ctx, &found, `SELECT `+idemColumns+` FROM idempotency_keys WHERE scope = ? AND idem_key = ?`,
			r.Scope, r.Key); err != nil {
			return err
		}
		return store.ErrAlreadyExists
	})
	return found, err
}

func (q *queries) TakeOverIdempotencyKey(ctx context.Context, scope, key, requestHash string, staleBefore, at time.Time) error {
	// One conditional UPDATE: the row lock (PostgreSQL) or the write lock
	// (SQLite) makes concurrent takers queue, and every taker after the
	// first sees created_at = at, which is not before staleBefore.
	n, err := q.exec(ctx, `UPDATE idempotency_keys SET created_at = ?
		WHERE scope = ? AND idem_key = ? AND status = 0 AND request_hash = ? AND created_at < ?`,
		ts(at), scope, key, requestHash, ts(staleBefore))
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// Complete and release act only on the reservation the caller made: once
// another request took it over, created_at differs.

func (q *queries) CompleteIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time, status int, body []byte) error {
	n, err := q.exec(ctx, `UPDATE idempotency_keys SET status = ?, body = ?
		WHERE scope = ? AND idem_key = ? AND status = 0 AND created_at = ?`,
		status, body, scope, key, ts(reservedAt))
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

func (q *queries) ReleaseIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time) error {
	_, err := q.exec(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND idem_key = ? AND status = 0 AND created_at = ?`,
		scope, key, ts(reservedAt))
	return err
}
