package sqlstore

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const sessionColumns = `id, user_id, device_id, device_name, user_agent, ip, created_at,
	last_used_at, expires_at, max_expires_at, revoked_at, revoke_reason`

func (q *queries) createSession(ctx context.Context, s store.Session) error {
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

func (q *queries) ActiveSessions(ctx context.Context, userID string, now time.Time, limit int) ([]store.Session, error) {
	var out []store.Session
	err := q.selectAll(ctx, &out, `SELECT `+sessionColumns+` FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?
		ORDER BY created_at DESC, id DESC LIMIT ?`, userID, ts(now), limit)
	return out, err
}
