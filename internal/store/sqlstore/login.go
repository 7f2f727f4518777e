package sqlstore

import (
	"context"
	"errors"

	"github.com/palisade-auth/palisade/internal/store"
)

// OpenSession implements store.Queries. On PostgreSQL the whole login is
// one statement, so it costs one round trip; a login waits on the database
// while its CPU could be hashing the next password, so round trips are what
// login throughput loses above the hash. Foreign keys between the rows it
// inserts are checked at the end of the statement.
func (q *queries) OpenSession(ctx context.Context, l store.Login) (string, error) {
	if q.dialect == Postgres {
		return q.openSessionPostgres(ctx, l)
	}
	var replaced string
	err := q.atomic(ctx, func(q *queries) error {
		var err error
		replaced, err = q.openSessionSteps(ctx, l)
		return err
	})
	return replaced, err
}

func (q *queries) openSessionSteps(ctx context.Context, l store.Login) (string, error) {
	s, now := l.Session, l.Session.CreatedAt
	// The write lock (_txlock=immediate) is held from the start, so an
	// account disabled meanwhile is either seen here or disabled after
	// this session exists, and then revoked with the others.
	if err := q.requireEnabled(ctx, s.UserID); err != nil {
		return "", err
	}
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
	var res struct {
		Replaced string `db:"replaced"`
		Opened   bool   `db:"opened"`
	}
	// Every write hangs on u, the user's row locked only while enabled (FOR
	// KEY SHARE: the mode the foreign keys of the inserts take anyway, and
	// one the disable's FOR UPDATE waits for): a concurrent disable either
	// waits for this login and then revokes its session with the others,
	// or commits first, and then u is empty and nothing is written.
	err := q.get(ctx, &res, `WITH u AS (
			SELECT id FROM users WHERE id = ? AND status = ? FOR KEY SHARE
		), pw AS (
			UPDATE users SET password_hash = ?, updated_at = ? WHERE id IN (SELECT id FROM u) AND ? <> ''
		), old AS (
			UPDATE sessions SET revoked_at = ?, revoke_reason = 'replaced'
			WHERE id = (SELECT id FROM sessions
				WHERE user_id IN (SELECT id FROM u) AND device_id = ? AND revoked_at IS NULL AND expires_at > ?
				ORDER BY created_at DESC LIMIT 1)
			RETURNING id
		), old_tokens AS (
			UPDATE refresh_tokens SET revoked_at = ?
			WHERE session_id IN (SELECT id FROM old) AND revoked_at IS NULL
		), replaced AS (
			INSERT INTO audit_events (`+auditColumns+`)
			SELECT ?, ?, ?, ?, old.id, ?, ?, ?, ?, CAST(? AS jsonb) FROM old
		), sess AS (
			INSERT INTO sessions (`+sessionColumns+`) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM u
		), tok AS (
			INSERT INTO refresh_tokens (`+tokenColumns+`) SELECT ?, ?, ?, ?, ?, ?, ?, ? FROM u
		), opened AS (
			INSERT INTO audit_events (`+auditColumns+`) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS jsonb) FROM u
		)
		SELECT COALESCE((SELECT id FROM old), '') AS replaced, EXISTS (SELECT 1 FROM u) AS opened`,
		s.UserID, store.StatusEnabled,
		l.NewPasswordHash, now, l.NewPasswordHash,
		now, s.DeviceID, now,
		now,
		r.ID, r.Type, ts(r.OccurredAt), r.UserID, r.ActorID, r.IP, r.UserAgent, r.RequestID, jsonData(r.Data),
		s.ID, s.UserID, s.DeviceID, s.DeviceName, s.UserAgent, s.IP, ts(s.CreatedAt), ts(s.LastUsedAt), ts(s.ExpiresAt), tsp(s.RevokedAt), s.RevokeReason,
		t.Hash, t.SessionID, t.UserID, t.ParentHash, ts(t.IssuedAt), ts(t.ExpiresAt), tsp(t.RotatedAt), tsp(t.RevokedAt),
		o.ID, o.Type, ts(o.OccurredAt), o.UserID, o.SessionID, o.ActorID, o.IP, o.UserAgent, o.RequestID, jsonData(o.Data))
	if err != nil {
		return "", err
	}
	if !res.Opened {
		// Why nothing was written: no such user, or not enabled.
		if err := q.requireEnabled(ctx, s.UserID); err != nil {
			return "", err
		}
		return "", store.ErrPrecondition
	}
	return res.Replaced, nil
}

// requireEnabled returns ErrNotFound when the user does not exist and
// ErrPrecondition when it is not enabled.
func (q *queries) requireEnabled(ctx context.Context, userID string) error {
	var status string
	if err := q.get(ctx, &status, `SELECT status FROM users WHERE id = ?`, userID); err != nil {
		return err
	}
	if status != store.StatusEnabled {
		return store.ErrPrecondition
	}
	return nil
}
