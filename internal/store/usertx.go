package store

import (
	"context"
	"errors"
	"time"
)

// ErrOtherUser means a UserTx was handed a record of another user than the
// one it locked (a session, token, mail or audit entry whose UserID is not
// its user's). Nothing was written.
var ErrOtherUser = errors.New("store: record of another user than the locked one")

// ErrTxDone means a UserTx was used after the function it was handed to
// returned. Nothing was written.
var ErrTxDone = errors.New("store: user transaction used after it ended")

// UserTx is the one way to write a user's sessions, refresh tokens,
// password hash or status: Store.WithUser hands it out after taking the
// user's row, so every writer of one user queues on that row, takes every
// other lock after it, and cannot deadlock with another. Its methods are
// plain statements on that user's rows only: they take no user id, and a
// record carrying one must carry the locked user's (ErrOtherUser
// otherwise). The policy (is the user enabled, is the password hash still
// the one checked) is the caller's, read from User under the lock.
//
// A UserTx is valid only while the function it was handed to runs: it
// must not be kept, nor used from another goroutine after that function
// returned (ErrTxDone).
type UserTx interface {
	// User is the user's row as it stood when locked, with the changes
	// made through this UserTx since.
	User() User
	// UserByID reads any user without locking it (the admin acting, say):
	// the only use of another user's row a UserTx allows.
	UserByID(ctx context.Context, id string) (User, error)

	// SetPasswordHash replaces the user's password hash.
	SetPasswordHash(ctx context.Context, hash string, now time.Time) error
	// SetEmailVerified records that the user proved control of the
	// address, unless already recorded.
	SetEmailVerified(ctx context.Context, at time.Time) error
	// Update applies the set fields of ch and sets updated_at = now, even
	// when no field changes. It returns the user after the change.
	Update(ctx context.Context, ch UserChange, now time.Time) (User, error)

	// CreateSession inserts s.
	CreateSession(ctx context.Context, s Session) error
	// CreateRefreshToken inserts the first token of a session of the user.
	CreateRefreshToken(ctx context.Context, t RefreshToken) error
	// ActiveSessionByDevice returns the user's newest unrevoked session
	// for deviceID that is unexpired at now, or ErrNotFound.
	ActiveSessionByDevice(ctx context.Context, deviceID string, now time.Time) (Session, error)
	// RevokeSession revokes the user's session id and every refresh token
	// in it. It reports whether anything changed (false when already
	// revoked); ErrNotFound when the user has no such session.
	RevokeSession(ctx context.Context, id, reason string, now time.Time) (bool, error)
	// RevokeSessions revokes every unrevoked session and refresh token of
	// the user and returns the ids of the sessions it revoked.
	RevokeSessions(ctx context.Context, reason string, now time.Time) ([]string, error)
	// RevokeSessionsPast revokes the user's active sessions (unrevoked,
	// unexpired at now) past the keep most recently used, with their
	// refresh tokens, and returns their ids, least recently used first.
	RevokeSessionsPast(ctx context.Context, keep int, reason string, now time.Time) ([]string, error)
	// TouchSession records a use of the user's session id while current,
	// the hash of a refresh token of it, is still its live token:
	// unrevoked, unrotated and unexpired at now, in an unrevoked session.
	// ErrNotFound otherwise (the user has no such session, or it or the
	// token was revoked or the token used meanwhile), and nothing changes.
	TouchSession(ctx context.Context, id, current string, now time.Time, ip, userAgent string) error

	// ConsumeOneTimeToken marks the user's token used at now, only when it
	// has the purpose, is unused and unexpired at now; otherwise
	// ErrNotFound and nothing changes.
	ConsumeOneTimeToken(ctx context.Context, hash, purpose string, now time.Time) (OneTimeToken, error)
	// CreateOneTimeToken is Queries.CreateOneTimeToken for the user.
	CreateOneTimeToken(ctx context.Context, t OneTimeToken) error
	// EnqueueMail queues j, a mail to the user.
	EnqueueMail(ctx context.Context, j MailJob) error
	// LastMailAt is when the latest mail of kind was queued for the user,
	// or ErrNotFound.
	LastMailAt(ctx context.Context, kind string) (time.Time, error)
	// AppendAudit records e, an event of the user (e.UserID "" is set to
	// the user's id).
	AppendAudit(ctx context.Context, e AuditEvent) error
}
