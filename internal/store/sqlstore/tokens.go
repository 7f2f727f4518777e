package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/palisade-auth/palisade/internal/store"
)

const tokenColumns = `token_hash, session_id, user_id, parent_hash, issued_at, expires_at, rotated_at, revoked_at`

func (q *queries) createRefreshToken(ctx context.Context, t store.RefreshToken) error {
	_, err := q.exec(ctx, `INSERT INTO refresh_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.Hash, t.SessionID, t.UserID, t.ParentHash, ts(t.IssuedAt), ts(t.ExpiresAt), tsp(t.RotatedAt), tsp(t.RevokedAt))
	return err
}

func (q *queries) RefreshTokenByHash(ctx context.Context, hash string) (store.RefreshToken, error) {
	var t store.RefreshToken
	err := q.get(ctx, &t, `SELECT `+tokenColumns+` FROM refresh_tokens WHERE token_hash = ?`, hash)
	return t, err
}

// ownerColumns are the user columns a rotation returns: everything but
// the password hash, which a refresh has no use for.
const ownerColumns = `u.id, u.email, u.email_normalized, u.name, u.role, u.status, u.email_verified_at,
	u.tenant_id, u.organization_id, u.created_at, u.updated_at`

// claimed is a rotated token joined with its owner, and the expiry its
// successor was given.
type claimed struct {
	store.RefreshToken
	store.User
	NextExpiresAt time.Time `db:"next_expires_at"`
}

// RotateRefreshToken claims the token with one conditional UPDATE: the
// row lock it takes (PostgreSQL) or the write lock the transaction holds
// from BEGIN (SQLite) makes concurrent rotations queue, and every one after
// the first finds rotated_at set and changes nothing. On PostgreSQL the
// whole rotation, audit entry included, is one statement, so outside a
// transaction it costs one round trip. Only a refused rotation reads the
// token again, to report why.
func (q *queries) RotateRefreshToken(ctx context.Context, r store.RotateRequest) (store.Rotation, error) {
	var rot store.Rotation
	var c claimed
	var err error
	if q.dialect == Postgres {
		c, err = q.claimPostgres(ctx, r)
	} else {
		err = q.atomic(ctx, func(q *queries) error {
			c, err = q.claimSQLite(ctx, r)
			return err
		})
	}
	if err == nil {
		rot.Token, rot.User, rot.NextExpiresAt = c.RefreshToken, c.User, c.NextExpiresAt
		rot.Token.RotatedAt = nil // as it stood before this call
		return rot, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return rot, err
	}
	return q.refusedRotation(ctx, r.Hash)
}

// refusedRotation reports a token that could not be rotated, as it stands.
func (q *queries) refusedRotation(ctx context.Context, hash string) (store.Rotation, error) {
	var rot store.Rotation
	if err := q.get(ctx, &rot.Token, `SELECT `+tokenColumns+` FROM refresh_tokens WHERE token_hash = ?`, hash); err != nil {
		return rot, err
	}
	if rot.Token.RotatedAt != nil {
		var child store.RefreshToken
		err := q.get(ctx, &child, `SELECT `+tokenColumns+` FROM refresh_tokens
			WHERE parent_hash = ? ORDER BY issued_at LIMIT 1`, hash)
		switch {
		case err == nil:
			rot.Child = &child
		case !errors.Is(err, store.ErrNotFound):
			return rot, err
		}
	}
	return rot, store.ErrPrecondition
}

// claimPostgresSQL is the rotation in one statement, with named
// parameters.
//
// owner locks the user's row (FOR KEY SHARE, as the child's foreign key
// would), only while enabled, before the token's row is touched: a
// WithUser takes it first too, so the two queue instead of deadlocking
// (the token rotated first, then the insert's foreign-key check waiting on
// a disable's user lock, while the disable waits on the token to revoke
// it). A rotation that waited for a disable finds the owner disabled and
// rotates nothing.
//
// old asks only that owner found the user (EXISTS, a one-time filter
// evaluated before the token's row is read), never joins the token to it
// by user: a join on user_id lets the planner reach the token through
// refresh_tokens_user_live, which holds every rotated token of the user's
// sessions, and filter them all by hash on each refresh (what it chose on
// a fresh database). The hash is the primary key, so the token is one
// index probe whatever the chain's length.
const claimPostgresSQL = `WITH owner AS (
		SELECT id FROM users
		WHERE id = (SELECT user_id FROM refresh_tokens WHERE token_hash = :hash) AND status = :enabled
		FOR KEY SHARE
	), old AS (
		UPDATE refresh_tokens rt SET rotated_at = :now
		FROM users u, sessions s
		WHERE rt.token_hash = :hash AND rt.rotated_at IS NULL AND rt.revoked_at IS NULL AND rt.expires_at > :now
			AND EXISTS (SELECT 1 FROM owner) AND u.id = rt.user_id AND s.id = rt.session_id
		RETURNING rt.token_hash, rt.session_id, rt.user_id, rt.parent_hash, rt.issued_at, rt.expires_at,
			rt.rotated_at, rt.revoked_at, ` + ownerColumns + `,
			LEAST(CAST(:next_expires_at AS timestamptz), s.max_expires_at) AS next_expires_at
	), child AS (
		INSERT INTO refresh_tokens (token_hash, session_id, user_id, parent_hash, issued_at, expires_at)
		SELECT :next_hash, session_id, user_id, token_hash, :next_issued_at, next_expires_at FROM old
	), sess AS (
		UPDATE sessions SET last_used_at = :now, expires_at = old.next_expires_at,
			ip = CASE WHEN :ip <> '' THEN :ip ELSE sessions.ip END,
			user_agent = CASE WHEN :user_agent <> '' THEN :user_agent ELSE sessions.user_agent END
		FROM old WHERE sessions.id = old.session_id
	), audit AS (
		INSERT INTO audit_events (` + auditColumns + `)
		SELECT :event_id, :event_type, :event_at,
			CASE WHEN :event_user_id <> '' THEN :event_user_id ELSE old.user_id END,
			CASE WHEN :event_session_id <> '' THEN :event_session_id ELSE old.session_id END,
			:event_actor_id, :event_ip, :event_user_agent, :event_request_id, CAST(:event_data AS jsonb)
		FROM old WHERE :with_event
	)
	SELECT * FROM old`

func (q *queries) claimPostgres(ctx context.Context, r store.RotateRequest) (claimed, error) {
	var c claimed
	query, args, err := claimPostgresQuery(r)
	if err != nil {
		return c, err
	}
	err = q.get(ctx, &c, query, args...)
	return c, err
}

// claimPostgresQuery binds r to claimPostgresSQL.
func claimPostgresQuery(r store.RotateRequest) (string, []any, error) {
	var e store.AuditEvent
	if r.Event != nil {
		e = *r.Event
	}
	named := map[string]any{
		"hash": r.Hash, "enabled": store.StatusEnabled, "now": ts(r.Now),
		"next_hash": r.Next.Hash, "next_issued_at": ts(r.Next.IssuedAt), "next_expires_at": ts(r.Next.ExpiresAt),
		"ip": r.IP, "user_agent": r.UserAgent,
		"with_event": r.Event != nil, "event_id": e.ID, "event_type": e.Type, "event_at": ts(e.OccurredAt),
		"event_user_id": e.UserID, "event_session_id": e.SessionID, "event_actor_id": e.ActorID,
		"event_ip": e.IP, "event_user_agent": e.UserAgent, "event_request_id": e.RequestID, "event_data": jsonData(e.Data),
	}
	query, args, err := sqlx.Named(claimPostgresSQL, named)
	if err != nil {
		return "", nil, fmt.Errorf("sqlstore: rotation statement: %w", err)
	}
	return query, args, nil
}

func (q *queries) claimSQLite(ctx context.Context, r store.RotateRequest) (claimed, error) {
	hash, next, now, ip, userAgent, event := r.Hash, r.Next, r.Now, r.IP, r.UserAgent, r.Event
	var c claimed
	if err := q.get(ctx, &c.RefreshToken, `UPDATE refresh_tokens SET rotated_at = ?
		WHERE token_hash = ? AND rotated_at IS NULL AND revoked_at IS NULL AND expires_at > ?
			AND user_id IN (SELECT id FROM users WHERE status = ?)
		RETURNING `+tokenColumns, ts(now), hash, ts(now), store.StatusEnabled); err != nil {
		return c, err
	}
	t := c.RefreshToken
	if err := q.get(ctx, &c.User, `SELECT `+ownerColumns+` FROM users u WHERE u.id = ?`, t.UserID); err != nil {
		return c, err
	}
	var end time.Time
	if err := q.get(ctx, &end, `SELECT max_expires_at FROM sessions WHERE id = ?`, t.SessionID); err != nil {
		return c, err
	}
	if next.ExpiresAt.After(end) {
		next.ExpiresAt = end
	}
	c.NextExpiresAt = ts(next.ExpiresAt)
	next.SessionID, next.UserID, next.ParentHash = t.SessionID, t.UserID, hash
	next.RotatedAt, next.RevokedAt = nil, nil
	if err := q.createRefreshToken(ctx, next); err != nil {
		return c, err
	}
	if _, err := q.exec(ctx, `UPDATE sessions SET last_used_at = ?, expires_at = ?,
		ip = CASE WHEN ? <> '' THEN ? ELSE ip END,
		user_agent = CASE WHEN ? <> '' THEN ? ELSE user_agent END
		WHERE id = ?`, ts(now), ts(next.ExpiresAt), ip, ip, userAgent, userAgent, t.SessionID); err != nil {
		return c, err
	}
	if event != nil {
		e := *event
		if e.UserID == "" {
			e.UserID = t.UserID
		}
		if e.SessionID == "" {
			e.SessionID = t.SessionID
		}
		if err := q.AppendAudit(ctx, e); err != nil {
			return c, err
		}
	}
	return c, nil
}
