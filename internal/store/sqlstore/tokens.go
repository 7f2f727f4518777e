package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const tokenColumns = `token_hash, session_id, user_id, parent_hash, issued_at, expires_at, rotated_at, revoked_at`

func (q *queries) CreateRefreshToken(ctx context.Context, t store.RefreshToken) error {
	_, err := q.exec(ctx, `INSERT INTO refresh_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.Hash, t.SessionID, t.UserID, t.ParentHash, ts(t.IssuedAt), ts(t.ExpiresAt), tsp(t.RotatedAt), tsp(t.RevokedAt))
	return err
}

func (q *queries) RefreshTokenByHash(ctx context.Context, hash string) (store.RefreshToken, error) {
	var t store.RefreshToken
	err := q.get(ctx, &t, `SELECT `+tokenColumns+` FROM refresh_tokens WHERE token_hash = ?`, hash)
	return t, err
}

// RotateRefreshToken locks the token row for the rest of the transaction
// (FOR UPDATE on PostgreSQL; on SQLite the transaction holds the write lock
// from BEGIN), so concurrent rotations queue and every one after the first
// finds the token rotated.
func (q *queries) RotateRefreshToken(ctx context.Context, hash string, next store.RefreshToken, now time.Time, ip, userAgent string) (store.Rotation, error) {
	var rot store.Rotation
	err := q.atomic(ctx, func(q *queries) error {
		if err := q.get(ctx, &rot.Token, `SELECT `+tokenColumns+` FROM refresh_tokens
			WHERE token_hash = ?`+q.forUpdate(), hash); err != nil {
			return err
		}
		t := rot.Token
		if t.RotatedAt != nil {
			var child store.RefreshToken
			err := q.get(ctx, &child, `SELECT `+tokenColumns+` FROM refresh_tokens
				WHERE parent_hash = ? ORDER BY issued_at LIMIT 1`, hash)
			switch {
			case err == nil:
				rot.Child = &child
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			return store.ErrPrecondition
		}
		if t.RevokedAt != nil || !now.Before(t.ExpiresAt) {
			return store.ErrPrecondition
		}
		n, err := q.exec(ctx, `UPDATE refresh_tokens SET rotated_at = ?
			WHERE token_hash = ? AND rotated_at IS NULL AND revoked_at IS NULL`, ts(now), hash)
		if err != nil {
			return err
		}
		if n != 1 {
			return store.ErrPrecondition
		}
		next.SessionID, next.UserID, next.ParentHash = t.SessionID, t.UserID, hash
		next.RotatedAt, next.RevokedAt = nil, nil
		if err := q.CreateRefreshToken(ctx, next); err != nil {
			return err
		}
		_, err = q.exec(ctx, `UPDATE sessions SET last_used_at = ?, expires_at = ?,
			ip = CASE WHEN ? <> '' THEN ? ELSE ip END,
			user_agent = CASE WHEN ? <> '' THEN ? ELSE user_agent END
			WHERE id = ?`, ts(now), ts(next.ExpiresAt), ip, ip, userAgent, userAgent, t.SessionID)
		return err
	})
	return rot, err
}
