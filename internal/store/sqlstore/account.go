package sqlstore

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const oneTimeColumns = `token_hash, user_id, purpose, created_at, expires_at, used_at`

func (q *queries) CreateOneTimeToken(ctx context.Context, t store.OneTimeToken) error {
	return q.atomic(ctx, func(q *queries) error {
		if _, err := q.exec(ctx, `UPDATE one_time_tokens SET used_at = ?
			WHERE user_id = ? AND purpose = ? AND used_at IS NULL`, ts(t.CreatedAt), t.UserID, t.Purpose); err != nil {
			return err
		}
		_, err := q.exec(ctx, `INSERT INTO one_time_tokens (`+oneTimeColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
			t.Hash, t.UserID, t.Purpose, ts(t.CreatedAt), ts(t.ExpiresAt), tsp(t.UsedAt))
		return err
	})
}

func (q *queries) OneTimeTokenByHash(ctx context.Context, hash string) (store.OneTimeToken, error) {
	var t store.OneTimeToken
	err := q.get(ctx, &t, `SELECT `+oneTimeColumns+` FROM one_time_tokens WHERE token_hash = ?`, hash)
	return t, err
}

func (q *queries) ConsumeOneTimeToken(ctx context.Context, hash, purpose string, now time.Time) (store.OneTimeToken, error) {
	var t store.OneTimeToken
	err := q.get(ctx, &t, `UPDATE one_time_tokens SET used_at = ?
		WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?
		RETURNING `+oneTimeColumns, ts(now), hash, purpose, ts(now))
	return t, err
}

const mailColumns = `id, kind, user_id, to_addr, name, sealed_token, notice, attempts, created_at, next_attempt_at,
	sent_at, failed_at, last_error`

func (q *queries) EnqueueMail(ctx context.Context, j store.MailJob) error {
	_, err := q.exec(ctx, `INSERT INTO mail_outbox (`+mailColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.Kind, j.UserID, j.To, j.Name, j.SealedToken, textOrNull(j.Notice), j.Attempts, ts(j.CreatedAt), ts(j.NextAttemptAt),
		tsp(j.SentAt), tsp(j.FailedAt), j.LastError)
	return err
}

// textOrNull is b for a TEXT column (as a string: lib/pq would send a
// []byte as bytea), or NULL when b is empty.
func textOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func (q *queries) LastMailAt(ctx context.Context, userID, kind string) (time.Time, error) {
	var at time.Time
	err := q.get(ctx, &at, `SELECT created_at FROM mail_outbox WHERE user_id = ? AND kind = ?
		ORDER BY created_at DESC LIMIT 1`, userID, kind)
	return at, err
}

// ClaimMail leases due jobs. On PostgreSQL, SKIP LOCKED lets the workers of
// several replicas claim disjoint batches without waiting on each other; a
// SQLite transaction holds the write lock, which serializes them anyway.
func (q *queries) ClaimMail(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.MailJob, error) {
	skipLocked := ""
	if q.dialect == Postgres {
		skipLocked = " FOR UPDATE SKIP LOCKED"
	}
	var out []store.MailJob
	err := q.atomic(ctx, func(q *queries) error {
		out = nil
		return q.selectAll(ctx, &out, `UPDATE mail_outbox SET next_attempt_at = ?
			WHERE id IN (SELECT id FROM mail_outbox
				WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ?
				ORDER BY next_attempt_at, id LIMIT ?`+skipLocked+`)
			RETURNING `+mailColumns, ts(now.Add(lease)), ts(now), limit)
	})
	return out, err
}

func (q *queries) MailSent(ctx context.Context, id string, now time.Time) error {
	return q.finishMail(ctx, `UPDATE mail_outbox SET sent_at = ?, sealed_token = NULL, notice = NULL, attempts = attempts + 1 WHERE id = ?`, ts(now), id)
}

func (q *queries) MailRetry(ctx context.Context, id string, attempts int, next time.Time, lastErr string) error {
	return q.finishMail(ctx, `UPDATE mail_outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?`,
		attempts, ts(next), truncateText(lastErr, 1000), id)
}

func (q *queries) MailFailed(ctx context.Context, id string, now time.Time, lastErr string) error {
	return q.finishMail(ctx, `UPDATE mail_outbox SET failed_at = ?, sealed_token = NULL, notice = NULL, last_error = ? WHERE id = ?`,
		ts(now), truncateText(lastErr, 1000), id)
}

func (q *queries) finishMail(ctx context.Context, query string, args ...any) error {
	n, err := q.exec(ctx, query, args...)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// truncateText cuts s to at most n bytes on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
