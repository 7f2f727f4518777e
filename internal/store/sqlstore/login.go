package sqlstore

import (
	"context"
	"errors"

	"github.com/palisade-auth/palisade/internal/store"
)

// OpenSession implements store.Queries. It first locks the user's row (FOR
// UPDATE on PostgreSQL; SQLite's write transactions run one at a time) and
// checks that the user is enabled and its password the one checked. Whatever else changes the user's
// sessions takes that row first too (a rotation in key share, revocations
// and disable for update), so they queue instead of deadlocking, and each
// sees what the one before it wrote: a rotation of the session this login
// replaces has its new token revoked here, and a disable either revokes
// this login's session or, committed first, makes it write nothing; so
// does a password change. On
// PostgreSQL the writes are then one statement, begun after the lock so
// that its snapshot includes what the login waited for.
func (q *queries) OpenSession(ctx context.Context, l store.Login) (string, error) {
	var replaced string
	err := q.atomic(ctx, func(q *queries) error {
		u, err := q.LockUser(ctx, l.Session.UserID)
		if err != nil {
			return err
		}
		if u.Status != store.StatusEnabled || (l.CheckedHash != "" && u.PasswordHash != l.CheckedHash) {
			return store.ErrPrecondition
		}
		if q.dialect == Postgres {
			replaced, err = q.openSessionPostgres(ctx, l)
		} else {
			replaced, err = q.openSessionSteps(ctx, l)
		}
		return err
	})
	return replaced, err
}

func (q *queries) openSessionSteps(ctx context.Context, l store.Login) (string, error) {
	s, now := l.Session, l.Session.CreatedAt
	if l.NewPasswordHash != "" {
		if err := q.SetPasswordHash(ctx, s.UserID, l.NewPasswordHash, now); err != nil {
			return "", err
		}
	}
	replaced := ""
	old, err := q.ActiveSessionByDevice(ctx, s.UserID, s.DeviceID, now)
	switch {
	case err == nil:
		if _, err := q.RevokeSession(ctx, old.ID, "replaced", now); err != nil {
			return "", err
		}
		e := l.Replaced
		e.SessionID = old.ID
		if err := q.AppendAudit(ctx, e); err != nil {
			return "", err
		}
		replaced = old.ID
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	if err := q.CreateSession(ctx, s); err != nil {
		return "", err
	}
	if err := q.CreateRefreshToken(ctx, l.Token); err != nil {
		return "", err
	}
	return replaced, q.AppendAudit(ctx, l.Opened)
}

func (q *queries) openSessionPostgres(ctx context.Context, l store.Login) (string, error) {
	s, t, o, r := l.Session, l.Token, l.Opened, l.Replaced
	now := ts(s.CreatedAt)
	var replaced string
	err := q.get(ctx, &replaced, `WITH pw AS (
			UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ? AND ? <> ''
		), old AS (
			UPDATE sessions SET revoked_at = ?, revoke_reason = 'replaced'
			WHERE id = (SELECT id FROM sessions
				WHERE user_id = ? AND device_id = ? AND revoked_at IS NULL AND expires_at > ?
				ORDER BY created_at DESC LIMIT 1)
			RETURNING id
		), old_tokens AS (
			UPDATE refresh_tokens SET revoked_at = ?
			WHERE session_id IN (SELECT id FROM old) AND revoked_at IS NULL
		), replaced AS (
			INSERT INTO audit_events (`+auditColumns+`)
			SELECT ?, ?, ?, ?, old.id, ?, ?, ?, ?, CAST(? AS jsonb) FROM old
		), sess AS (
			INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		), tok AS (
			INSERT INTO refresh_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		), opened AS (
			INSERT INTO audit_events (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS jsonb))
		)
		SELECT COALESCE((SELECT id FROM old), '')`,
		l.NewPasswordHash, now, s.UserID, l.NewPasswordHash,
		now, s.UserID, s.DeviceID, now,
		now,
		r.ID, r.Type, ts(r.OccurredAt), r.UserID, r.ActorID, r.IP, r.UserAgent, r.RequestID, jsonData(r.Data),
		s.ID, s.UserID, s.DeviceID, s.DeviceName, s.UserAgent, s.IP, ts(s.CreatedAt), ts(s.LastUsedAt), ts(s.ExpiresAt), ts(s.MaxExpiresAt), tsp(s.RevokedAt), s.RevokeReason,
		t.Hash, t.SessionID, t.UserID, t.ParentHash, ts(t.IssuedAt), ts(t.ExpiresAt), tsp(t.RotatedAt), tsp(t.RevokedAt),
		o.ID, o.Type, ts(o.OccurredAt), o.UserID, o.SessionID, o.ActorID, o.IP, o.UserAgent, o.RequestID, jsonData(o.Data))
	return replaced, err
}
