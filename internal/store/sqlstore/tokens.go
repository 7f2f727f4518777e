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

// RotateRefreshToken claims the token with one conditional UPDATE: the
// row lock it takes (PostgreSQL) or the write lock the transaction holds
// from BEGIN (SQLite) makes concurrent rotations queue, and every one after
// the first finds rotated_at set and changes nothing. Only a refused
// rotation reads the token again, to report why.
func (q *queries) RotateRefreshToken(ctx context.Context, hash string, next store.RefreshToken, now time.Time, ip, userAgent string) (store.Rotation, error) {
	var rot store.Rotation
	err := q.atomic(ctx, func(q *queries) error {
		claimed, err := q.claimToken(ctx, hash, next, now, ip, userAgent)
		if err == nil {
			claimed.RotatedAt = nil // as it stood before this call
			rot.Token = claimed
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := q.get(ctx, &rot.Token, `SELECT `+tokenColumns+` FROM refresh_tokens WHERE token_hash = ?`, hash); err != nil {
			return err
		}
		if rot.Token.RotatedAt != nil {
			var child store.RefreshToken
			err := q.get(ctx, &child, `SELECT `+tokenColumns+` FROM refresh_tokens
				WHERE parent_hash = ? ORDER BY issued_at LIMIT 1`, hash)
			switch {
			case err == nil:
				rot.Child = &child
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		return store.ErrPrecondition
	})
	return rot, err
}

// claimToken marks the token rotated, inserts its child and extends the
// session when the token is live, returning the token's row; ErrNotFound
// when it is not (unknown, rotated, revoked or expired).
func (q *queries) claimToken(ctx context.Context, hash string, next store.RefreshToken, now time.Time, ip, userAgent string) (store.RefreshToken, error) {
	var t store.RefreshToken
	if q.dialect == Postgres {
		// One statement, one round trip: the claim, the child and the
		// session update succeed or fail together.
		err := q.get(ctx, &t, `WITH old AS (
				UPDATE refresh_tokens SET rotated_at = ?
				WHERE token_hash = ? AND rotated_at IS NULL AND revoked_at IS NULL AND expires_at > ?
				RETURNING `+tokenColumns+`
			), child AS (
				INSERT INTO refresh_tokens (token_hash, session_id, user_id, parent_hash, issued_at, expires_at)
				SELECT ?, session_id, user_id, token_hash, ?, ? FROM old
			), sess AS (
				UPDATE sessions SET last_used_at = ?, expires_at = ?,
					ip = CASE WHEN ? <> '' THEN ? ELSE sessions.ip END,
					user_agent = CASE WHEN ? <> '' THEN ? ELSE sessions.user_agent END
				FROM old WHERE sessions.id = old.session_id
			)
			SELECT `+tokenColumns+` FROM old`,
			ts(now), hash, ts(now),
			next.Hash, ts(next.IssuedAt), ts(next.ExpiresAt),
			ts(now), ts(next.ExpiresAt), ip, ip, userAgent, userAgent)
		return t, err
	}
	if err := q.get(ctx, &t, `UPDATE refresh_tokens SET rotated_at = ?
		WHERE token_hash = ? AND rotated_at IS NULL AND revoked_at IS NULL AND expires_at > ?
		RETURNING `+tokenColumns, ts(now), hash, ts(now)); err != nil {
		return t, err
	}
	next.SessionID, next.UserID, next.ParentHash = t.SessionID, t.UserID, hash
	next.RotatedAt, next.RevokedAt = nil, nil
	if err := q.CreateRefreshToken(ctx, next); err != nil {
		return t, err
	}
	_, err := q.exec(ctx, `UPDATE sessions SET last_used_at = ?, expires_at = ?,
		ip = CASE WHEN ? <> '' THEN ? ELSE ip END,
		user_agent = CASE WHEN ? <> '' THEN ? ELSE user_agent END
		WHERE id = ?`, ts(now), ts(next.ExpiresAt), ip, ip, userAgent, userAgent, t.SessionID)
	return t, err
}
