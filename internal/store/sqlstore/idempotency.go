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

func (q *queries) CompleteIdempotencyKey(ctx context.Context, scope, key string, status int, body []byte) error {
	n, err := q.exec(ctx, `UPDATE idempotency_keys SET status = ?, body = ? WHERE scope = ? AND idem_key = ?`,
		status, body, scope, key)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

func (q *queries) ReleaseIdempotencyKey(ctx context.Context, scope, key string) error {
	_, err := q.exec(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND idem_key = ?`, scope, key)
	return err
}
