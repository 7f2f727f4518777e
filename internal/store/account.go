package store

import (
	"context"
	"time"
)

// One-time token purposes.
const (
	PurposePasswordReset = "password_reset"
	PurposeVerifyEmail   = "verify_email"
)

// OneTimeToken is a password-reset or email-verification token: only its
// SHA-256 (hex) is stored.
type OneTimeToken struct {
	Hash      string     `db:"token_hash"`
	UserID    string     `db:"user_id"`
	Purpose   string     `db:"purpose"`
	CreatedAt time.Time  `db:"created_at"`
	ExpiresAt time.Time  `db:"expires_at"`
	UsedAt    *time.Time `db:"used_at"`
}

// Kinds of notice mails: they tell the account's owner that something
// happened to the account and carry no link (MailJob.Notice says what).
const (
	MailPasswordChanged = "password_changed_notice"
	MailPasswordReset   = "password_reset_notice"
)

// MailJob is a queued mail. SealedToken is the link token sealed under the
// key-encryption key; a notice mail has none, and Notice instead: a JSON
// object of what it reports (never a secret). Both are nil once the mail
// was sent or given up.
type MailJob struct {
	ID            string     `db:"id"`
	Kind          string     `db:"kind"`
	UserID        string     `db:"user_id"`
	To            string     `db:"to_addr"`
	Name          string     `db:"name"`
	SealedToken   []byte     `db:"sealed_token"`
	Notice        []byte     `db:"notice"`
	Attempts      int        `db:"attempts"`
	CreatedAt     time.Time  `db:"created_at"`
	NextAttemptAt time.Time  `db:"next_attempt_at"`
	SentAt        *time.Time `db:"sent_at"`
	FailedAt      *time.Time `db:"failed_at"`
	LastError     string     `db:"last_error"`
}

// AccountQueries are the operations of the password and email flows.
type AccountQueries interface {
	// CreateOneTimeToken inserts t and marks every older unused token of
	// the same user and purpose used at t.CreatedAt: a new link replaces
	// the old ones.
	CreateOneTimeToken(ctx context.Context, t OneTimeToken) error
	// OneTimeTokenByHash returns the token or ErrNotFound.
	OneTimeTokenByHash(ctx context.Context, hash string) (OneTimeToken, error)
	// ConsumeOneTimeToken marks the token used at now, only when it has
	// the purpose, is unused and unexpired at now; otherwise ErrNotFound and
	// nothing changes. Of concurrent consumptions exactly one succeeds.
	ConsumeOneTimeToken(ctx context.Context, hash, purpose string, now time.Time) (OneTimeToken, error)
	// EnqueueMail queues j (due at j.NextAttemptAt).
	EnqueueMail(ctx context.Context, j MailJob) error
	// LastMailAt is when the latest mail of kind was queued for the user,
	// or ErrNotFound.
	LastMailAt(ctx context.Context, userID, kind string) (time.Time, error)
	// ClaimMail leases up to limit due jobs (unsent, not failed, next
	// attempt at or before now) by moving their next attempt to now+lease,
	// so other workers skip them; a worker that dies leaves them due again.
	ClaimMail(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]MailJob, error)
	// MailSent marks the job sent and drops its sealed token and notice.
	MailSent(ctx context.Context, id string, now time.Time) error
	// MailRetry records a failed attempt and when to try again.
	MailRetry(ctx context.Context, id string, attempts int, next time.Time, lastErr string) error
	// MailFailed gives the job up and drops its sealed token and notice.
	MailFailed(ctx context.Context, id string, now time.Time, lastErr string) error
}
