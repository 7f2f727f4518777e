package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const sessionColumns = `id, user_id, device_id, device_name, user_agent, ip, created_at,
	last_used_at, expires_at, max_expires_at, revoked_at, revoke_reason`

func (q *queries) CreateSession(ctx context.Context, s store.Session) error {
	_, err := q.exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.UserID, s.DeviceID, s.DeviceName, s.UserAgent, s.IP, ts(s.CreatedAt),
		ts(s.LastUsedAt), ts(s.ExpiresAt), ts(s.MaxExpiresAt), tsp(s.RevokedAt), s.RevokeReason)
	return err
}

func (q *queries) SessionByID(ctx context.Context, id string) (store.Session, error) {
	var s store.Session
	err := q.get(ctx, &s, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	return s, err
}

func (q *queries) ActiveSessionByDevice(ctx context.Context, userID, deviceID string, now time.Time) (store.Session, error) {
	var s store.Session
	err := q.get(ctx, &s, `SELECT `+sessionColumns+` FROM sessions
		WHERE user_id = ? AND device_id = ? AND revoked_at IS NULL AND expires_at > ?
		ORDER BY created_at DESC LIMIT 1`, userID, deviceID, ts(now))
	return s, err
}

func (q *queries) ActiveSessions(ctx context.Context, userID string, now time.Time) ([]store.Session, error) {
	var out []store.Session
	err := q.selectAll(ctx, &out, `SELECT `+sessionColumns+` FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?
		ORDER BY created_at DESC, id DESC`, userID, ts(now))
	return out, err
}

func (q *queries) RevokeSession(ctx context.Context, id, reason string, now time.Time) (changed bool, err error) {
	err = q.atomic(ctx, func(q *queries) error {
		// The owner's row first, as rotations and logins take it before
		// their token and session rows: a refresh of this session in
		// flight finishes, and its new token is revoked below, where
		// taking the session first deadlocked with it (the rotation
		// holding its token, waiting for the session).
		if err := q.lockOwner(ctx, `SELECT user_id FROM sessions WHERE id = ?`, id); err != nil {
			return err
		}
		var exists int
		if err := q.get(ctx, &exists, `SELECT 1 FROM sessions WHERE id = ?`+q.forUpdate(), id); err != nil {
			return err
		}
		n, err := q.exec(ctx, `UPDATE sessions SET revoked_at = ?, revoke_reason = ?
			WHERE id = ? AND revoked_at IS NULL`, ts(now), reason, id)
		if err != nil {
			return err
		}
		changed = n > 0
		_, err = q.exec(ctx, `UPDATE refresh_tokens SET revoked_at = ?
			WHERE session_id = ? AND revoked_at IS NULL`, ts(now), id)
		return err
	})
	return changed, err
}

func (q *queries) RevokeUserSessions(ctx context.Context, userID, reason string, now time.Time) (ids []string, err error) {
	err = q.atomic(ctx, func(q *queries) error {
		ids = nil
		// The user's row first, as logins and rotations take it (key
		// share) before their session and token rows: one in flight
		// finishes before this starts, and this sees what it wrote. Taking
		// the sessions first could deadlock with a rotation that holds its
		// token and waits for its session.
		if err := q.lockOwner(ctx, `?`, userID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := q.selectAll(ctx, &ids, `SELECT id FROM sessions
			WHERE user_id = ? AND revoked_at IS NULL ORDER BY id`+q.forUpdate(), userID); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE sessions SET revoked_at = ?, revoke_reason = ?
			WHERE user_id = ? AND revoked_at IS NULL`, ts(now), reason, userID); err != nil {
			return err
		}
		_, err := q.exec(ctx, `UPDATE refresh_tokens SET revoked_at = ?
			WHERE user_id = ? AND revoked_at IS NULL`, ts(now), userID)
		return err
	})
	return ids, err
}

func (q *queries) TouchSession(ctx context.Context, id string, now time.Time, ip, userAgent string) error {
	n, err := q.exec(ctx, `UPDATE sessions SET last_used_at = ?,
		ip = CASE WHEN ? <> '' THEN ? ELSE ip END,
		user_agent = CASE WHEN ? <> '' THEN ? ELSE user_agent END
		WHERE id = ?`, ts(now), ip, ip, userAgent, userAgent, id)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// lockOwner locks, on PostgreSQL, the row of the user that ownerQuery (one
// argument, arg) names: the first lock of every revocation, so that they
// queue behind a login or a rotation of that user instead of deadlocking
// with it. ErrNotFound when there is no such row. SQLite needs nothing: its
// write transactions already run one at a time.
func (q *queries) lockOwner(ctx context.Context, ownerQuery string, arg any) error {
	if q.dialect != Postgres {
		return nil
	}
	var id string
	return q.get(ctx, &id, `SELECT id FROM users WHERE id = (`+ownerQuery+`) FOR UPDATE`, arg)
}
