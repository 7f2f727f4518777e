package sqlstore

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/palisade-auth/palisade/internal/store"
)

// WithUser implements store.Store: the user's row is the transaction's
// first lock (FOR UPDATE on PostgreSQL; on SQLite, BEGIN IMMEDIATE already
// holds the database's write lock), so whatever fn then locks, it locks
// after it, as every other writer of that user does.
func (s *Store) WithUser(ctx context.Context, userID string, fn func(store.UserTx) error) error {
	return s.queries.atomic(ctx, func(q *queries) error {
		tx := &userTx{q: q}
		if err := q.get(ctx, &tx.user, `SELECT `+userColumns+` FROM users WHERE id = ?`+q.forUpdate(), userID); err != nil {
			return err
		}
		defer tx.done.Store(true)
		return fn(tx)
	})
}

// userTx is a store.UserTx: the queries of one transaction, bound to the
// user whose row it locked.
type userTx struct {
	q    *queries
	user store.User
	done atomic.Bool // set when WithUser's fn has returned
}

var _ store.UserTx = (*userTx)(nil)

// check refuses a call after the transaction ended, and one for a record
// of another user.
func (t *userTx) check(userID string) error {
	if t.done.Load() {
		return store.ErrTxDone
	}
	if userID != t.user.ID {
		return store.ErrOtherUser
	}
	return nil
}

func (t *userTx) User() store.User { return t.user }

func (t *userTx) UserByID(ctx context.Context, id string) (store.User, error) {
	if err := t.check(t.user.ID); err != nil {
		return store.User{}, err
	}
	return t.q.UserByID(ctx, id)
}

func (t *userTx) SetPasswordHash(ctx context.Context, hash string, now time.Time) error {
	if err := t.check(t.user.ID); err != nil {
		return err
	}
	if _, err := t.q.exec(ctx, `UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?`, hash, ts(now), t.user.ID); err != nil {
		return err
	}
	t.user.PasswordHash, t.user.UpdatedAt = hash, ts(now)
	return nil
}

func (t *userTx) SetEmailVerified(ctx context.Context, at time.Time) error {
	if err := t.check(t.user.ID); err != nil {
		return err
	}
	if _, err := t.q.exec(ctx, `UPDATE users SET email_verified_at = COALESCE(email_verified_at, ?), updated_at = ?
		WHERE id = ?`, ts(at), ts(at), t.user.ID); err != nil {
		return err
	}
	if t.user.EmailVerifiedAt == nil {
		v := ts(at)
		t.user.EmailVerifiedAt = &v
	}
	t.user.UpdatedAt = ts(at)
	return nil
}

func (t *userTx) Update(ctx context.Context, ch store.UserChange, now time.Time) (store.User, error) {
	if err := t.check(t.user.ID); err != nil {
		return store.User{}, err
	}
	after := t.user
	sets, args := []string{"updated_at = ?"}, []any{ts(now)}
	for _, f := range []struct {
		column string
		value  *string
		field  *string
	}{
		{"status", ch.Status, &after.Status},
		{"role", ch.Role, &after.Role},
		{"tenant_id", ch.TenantID, &after.TenantID},
		{"organization_id", ch.OrganizationID, &after.OrganizationID},
	} {
		if f.value != nil {
			sets, args = append(sets, f.column+" = ?"), append(args, *f.value)
			*f.field = *f.value
		}
	}
	after.UpdatedAt = ts(now)
	if _, err := t.q.exec(ctx, `UPDATE users SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(args, t.user.ID)...); err != nil {
		return store.User{}, err
	}
	t.user = after
	return after, nil
}

func (t *userTx) CreateSession(ctx context.Context, s store.Session) error {
	if err := t.check(s.UserID); err != nil {
		return err
	}
	return t.q.createSession(ctx, s)
}

func (t *userTx) CreateRefreshToken(ctx context.Context, tok store.RefreshToken) error {
	if err := t.check(tok.UserID); err != nil {
		return err
	}
	// The session named must be the user's too: the token's user_id and
	// its session's could otherwise disagree.
	var owner string
	if err := t.q.get(ctx, &owner, `SELECT user_id FROM sessions WHERE id = ?`, tok.SessionID); err == nil && owner != t.user.ID {
		return store.ErrOtherUser
	}
	return t.q.createRefreshToken(ctx, tok)
}

func (t *userTx) ActiveSessionByDevice(ctx context.Context, deviceID string, now time.Time) (store.Session, error) {
	if err := t.check(t.user.ID); err != nil {
		return store.Session{}, err
	}
	return t.q.ActiveSessionByDevice(ctx, t.user.ID, deviceID, now)
}

func (t *userTx) RevokeSession(ctx context.Context, id, reason string, now time.Time) (bool, error) {
	if err := t.check(t.user.ID); err != nil {
		return false, err
	}
	var exists int
	if err := t.q.get(ctx, &exists, `SELECT 1 FROM sessions WHERE id = ? AND user_id = ?`+t.q.forUpdate(), id, t.user.ID); err != nil {
		return false, err
	}
	n, err := t.q.exec(ctx, `UPDATE sessions SET revoked_at = ?, revoke_reason = ?
		WHERE id = ? AND revoked_at IS NULL`, ts(now), reason, id)
	if err != nil {
		return false, err
	}
	_, err = t.q.exec(ctx, `UPDATE refresh_tokens SET revoked_at = ?
		WHERE session_id = ? AND revoked_at IS NULL`, ts(now), id)
	return n > 0, err
}

func (t *userTx) RevokeSessions(ctx context.Context, reason string, now time.Time) ([]string, error) {
	if err := t.check(t.user.ID); err != nil {
		return nil, err
	}
	var ids []string
	if err := t.q.selectAll(ctx, &ids, `SELECT id FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL ORDER BY id`+t.q.forUpdate(), t.user.ID); err != nil {
		return nil, err
	}
	if _, err := t.q.exec(ctx, `UPDATE sessions SET revoked_at = ?, revoke_reason = ?
		WHERE user_id = ? AND revoked_at IS NULL`, ts(now), reason, t.user.ID); err != nil {
		return nil, err
	}
	_, err := t.q.exec(ctx, `UPDATE refresh_tokens SET revoked_at = ?
		WHERE user_id = ? AND revoked_at IS NULL`, ts(now), t.user.ID)
	return ids, err
}

// revokeChunk bounds the ids one statement names.
const revokeChunk = 500

// RevokeSessionsPast counts first: a user under the limit, nearly every
// one, costs one count over the active-sessions index; one at it, the
// least recently used session found by a top-n sort, and statements
// naming it. (One statement selecting "all but the keep newest" sorted
// every active session on every login, and a flood of one account's
// logins paid for it.)
func (t *userTx) RevokeSessionsPast(ctx context.Context, keep int, reason string, now time.Time) ([]string, error) {
	if err := t.check(t.user.ID); err != nil {
		return nil, err
	}
	var active int
	if err := t.q.get(ctx, &active, `SELECT COUNT(*) FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?`, t.user.ID, ts(now)); err != nil {
		return nil, err
	}
	past := active - max(keep, 0)
	if past <= 0 {
		return nil, nil
	}
	var ids []string
	if err := t.q.selectAll(ctx, &ids, `SELECT id FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?
		ORDER BY last_used_at, created_at, id LIMIT ?`, t.user.ID, ts(now), past); err != nil {
		return nil, err
	}
	for chunk := range slices.Chunk(ids, revokeChunk) {
		q, args, err := sqlx.In(`UPDATE refresh_tokens SET revoked_at = ? WHERE revoked_at IS NULL AND session_id IN (?)`, ts(now), chunk)
		if err != nil {
			return nil, err
		}
		if _, err := t.q.exec(ctx, q, args...); err != nil {
			return nil, err
		}
		q, args, err = sqlx.In(`UPDATE sessions SET revoked_at = ?, revoke_reason = ? WHERE revoked_at IS NULL AND id IN (?)`, ts(now), reason, chunk)
		if err != nil {
			return nil, err
		}
		if _, err := t.q.exec(ctx, q, args...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (t *userTx) TouchSession(ctx context.Context, id, current string, now time.Time, ip, userAgent string) error {
	if err := t.check(t.user.ID); err != nil {
		return err
	}
	n, err := t.q.exec(ctx, `UPDATE sessions SET last_used_at = ?,
		ip = CASE WHEN ? <> '' THEN ? ELSE ip END,
		user_agent = CASE WHEN ? <> '' THEN ? ELSE user_agent END
		WHERE id = ? AND user_id = ? AND revoked_at IS NULL
		AND EXISTS (SELECT 1 FROM refresh_tokens WHERE token_hash = ? AND session_id = sessions.id
			AND rotated_at IS NULL AND revoked_at IS NULL AND expires_at > ?)`,
		ts(now), ip, ip, userAgent, userAgent, id, t.user.ID, current, ts(now))
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

func (t *userTx) ConsumeOneTimeToken(ctx context.Context, hash, purpose string, now time.Time) (store.OneTimeToken, error) {
	var ot store.OneTimeToken
	if err := t.check(t.user.ID); err != nil {
		return ot, err
	}
	err := t.q.get(ctx, &ot, `UPDATE one_time_tokens SET used_at = ?
		WHERE token_hash = ? AND user_id = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?
		RETURNING `+oneTimeColumns, ts(now), hash, t.user.ID, purpose, ts(now))
	return ot, err
}

func (t *userTx) CreateOneTimeToken(ctx context.Context, ot store.OneTimeToken) error {
	if err := t.check(ot.UserID); err != nil {
		return err
	}
	return t.q.CreateOneTimeToken(ctx, ot)
}

func (t *userTx) EnqueueMail(ctx context.Context, j store.MailJob) error {
	if err := t.check(j.UserID); err != nil {
		return err
	}
	return t.q.EnqueueMail(ctx, j)
}

func (t *userTx) LastMailAt(ctx context.Context, kind string) (time.Time, error) {
	if err := t.check(t.user.ID); err != nil {
		return time.Time{}, err
	}
	return t.q.LastMailAt(ctx, t.user.ID, kind)
}

func (t *userTx) AppendAudit(ctx context.Context, e store.AuditEvent) error {
	if e.UserID == "" {
		e.UserID = t.user.ID
	}
	if err := t.check(e.UserID); err != nil {
		return err
	}
	return t.q.AppendAudit(ctx, e)
}
