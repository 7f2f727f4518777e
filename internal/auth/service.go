// Package auth owns the issuer's flows: registration, login, refresh-token
// rotation with reuse detection, logout, sessions and the audit entries they
// write. It knows nothing of HTTP: the transport decodes a request, calls a
// method here and encodes the result or the *apperr.Error it returns.
//
// Every flow that writes an account's sessions, refresh tokens, password or
// status does it inside store.Store.WithUser of that account, which takes
// the account's row before anything else (the store's lock order), and
// decides there, from the UserTx's User, whether it may: login checks that
// the account is still enabled and its hash still the one it verified,
// password change that the current password is still the one checked, the
// leeway replay that the account is enabled. Refresh rotation is the
// store's one exception (RotateRefreshToken, a single statement); what a
// refused rotation means (reuse, revoke everything) runs in WithUser again.
package auth

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/text"
	"github.com/palisade-auth/palisade/internal/token"
)

// Audit event types (API.md section 5).
const (
	EventUserRegistered    = "user.registered"
	EventUserLoggedIn      = "user.logged_in"
	EventLoginFailed       = "login.failed"
	EventUserLoggedOut     = "user.logged_out"
	EventUserLoggedOutAll  = "user.logged_out_all"
	EventRefreshTokenUsed  = "refresh_token.used"
	EventRefreshTokenReuse = "refresh_token.reused"
	EventSessionRevoked    = "session.revoked"
	EventSigningKeyRotated = "signing_key.rotated"
)

// Default role of a new account.
const RoleUser = "user"

// Config holds the flow settings.
type Config struct {
	RefreshTokenTTL time.Duration
	// SessionMaxLifetime is how long after its login a session ends,
	// however often it is refreshed (default 90 days). Each session keeps
	// its end from its login: changing this moves no existing session's.
	SessionMaxLifetime time.Duration
	// MaxSessionsPerUser is how many active sessions one user may hold
	// (default 100): a login past it revokes the least recently used, so
	// neither the user's session list nor what one "log out everywhere"
	// adds to the revocation feed grows without bound.
	MaxSessionsPerUser int
	// RefreshReuseLeeway > 0 answers the most recently rotated token of a
	// session, presented again within this time, with the same successor
	// instead of treating it as theft.
	RefreshReuseLeeway time.Duration
	// ResetTokenTTL and VerifyTokenTTL are the lifetimes of the links in
	// password-reset and verification mails (defaults 30 min and 48 h).
	ResetTokenTTL  time.Duration
	VerifyTokenTTL time.Duration
	// ResendInterval is the least time between two verification mails to
	// one user (default 1 min).
	ResendInterval time.Duration
	// RequireVerifiedEmail refuses login until the email is verified.
	RequireVerifiedEmail bool
	// KeyActivateIn is how long a signing key created by a rotation is
	// published before it signs, when the rotation names no other time.
	KeyActivateIn time.Duration
}

// DefaultSessionMaxLifetime is the absolute lifetime of a session when the
// configuration sets none: 90 days.
const DefaultSessionMaxLifetime = 90 * 24 * time.Hour

// DefaultMaxSessionsPerUser is how many active sessions a user may hold
// when the configuration sets no number.
const DefaultMaxSessionsPerUser = 100

// Meta is what the transport knows about the caller, for the audit trail.
type Meta struct {
	IP        string
	UserAgent string
	RequestID string
}

const maxUserAgent = 512

// userAgent is the caller's User-Agent as it is stored: the client sends
// any bytes it likes, so it is made storable (text.Clean), at most 512
// bytes. It is cleaned here, not refused at the edge, because the request
// is fine whatever its client calls itself; every caller's Meta passes here.
func (m Meta) userAgent() string {
	return truncate(text.Clean(m.UserAgent), maxUserAgent)
}

// TokenPair is what login and refresh return.
type TokenPair struct {
	AccessToken      string
	RefreshToken     string
	ExpiresIn        time.Duration
	RefreshExpiresIn time.Duration
	SessionID        string
}

// Service runs the flows.
type Service struct {
	st         store.Store
	hasher     *password.Hasher
	policy     password.Policy
	minter     *token.Minter
	successor  []byte // secret from which rotated refresh tokens are derived
	cfg        Config
	log        *slog.Logger
	now        func() time.Time
	rand       io.Reader
	sealer     Sealer
	mailQueued func()
	urls       URLChecker
	// webhookQueued wakes the webhook dispatcher after a redelivery.
	webhookQueued func()
	keys          KeyManager
	bg            background
}

// Sealer seals the link token of a queued mail, bound to the mail's id, so
// the outbox never holds a token a database reader could use, and a webhook
// endpoint's secrets, bound to the endpoint's id.
type Sealer interface {
	Seal(plain []byte, context string) ([]byte, error)
	// Reseal returns sealed re-sealed under the newest key-encryption key
	// and whether that changed it (see ResealSecrets).
	Reseal(sealed []byte, context string) ([]byte, bool, error)
}

// Deps are the Service's collaborators.
type Deps struct {
	Store           store.Store
	Hasher          *password.Hasher
	Policy          password.Policy
	Minter          *token.Minter
	SuccessorSecret []byte
	Logger          *slog.Logger
	Now             func() time.Time
	Rand            io.Reader
	Sealer          Sealer
	MailQueued      func() // wakes the mail worker; may be nil
	// WebhookURLs checks webhook endpoint URLs at registration; the
	// webhook admin flows fail without it.
	WebhookURLs URLChecker
	// WebhookQueued wakes the webhook dispatcher; may be nil.
	WebhookQueued func()
	// Keys runs the signing-key lifecycle; the key admin flows fail
	// without it.
	Keys KeyManager
}

// New returns a Service.
func New(d Deps, cfg Config) *Service {
	if cfg.ResetTokenTTL <= 0 {
		cfg.ResetTokenTTL = 30 * time.Minute
	}
	if cfg.VerifyTokenTTL <= 0 {
		cfg.VerifyTokenTTL = 48 * time.Hour
	}
	if cfg.ResendInterval <= 0 {
		cfg.ResendInterval = time.Minute
	}
	if cfg.SessionMaxLifetime <= 0 {
		cfg.SessionMaxLifetime = DefaultSessionMaxLifetime
	}
	if cfg.MaxSessionsPerUser <= 0 {
		cfg.MaxSessionsPerUser = DefaultMaxSessionsPerUser
	}
	mailQueued := d.MailQueued
	if mailQueued == nil {
		mailQueued = func() {}
	}
	webhookQueued := d.WebhookQueued
	if webhookQueued == nil {
		webhookQueued = func() {}
	}
	return &Service{
		st: d.Store, hasher: d.Hasher, policy: d.Policy, minter: d.Minter, successor: d.SuccessorSecret,
		cfg: cfg, log: d.Logger, now: d.Now, rand: d.Rand, sealer: d.Sealer, mailQueued: mailQueued,
		urls: d.WebhookURLs, webhookQueued: webhookQueued, keys: d.Keys,
		bg: background{slots: make(chan struct{}, 16)},
	}
}

func (s *Service) newID() string {
	id, err := uuid.NewV7FromReader(s.rand)
	if err != nil {
		// The reader is crypto/rand in production, which does not fail.
		return uuid.NewString()
	}
	return id.String()
}

// clock returns now in UTC at the store's precision, so values written and
// read back compare equal on every database.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// withUser runs fn under the user's lock (store.WithUser) with the time
// read once the lock is held: a revocation that waited there takes effect,
// and its feed entry lasts (revoked_at + access-token TTL + skew), from
// when it could no longer be outrun, not from before the wait. Read
// before, a revocation held 40 s behind the lock published an entry that
// ended 9 s before a token minted meanwhile expired.
func (s *Service) withUser(ctx context.Context, userID string, fn func(tx store.UserTx, now time.Time) error) error {
	return s.st.WithUser(ctx, userID, func(tx store.UserTx) error { return fn(tx, s.clock()) })
}

// event builds an audit entry. data must hold no secret.
func (s *Service) event(typ string, at time.Time, m Meta, userID, sessionID string, data map[string]any) store.AuditEvent {
	if data == nil {
		data = map[string]any{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		raw = []byte("{}")
	}
	return store.AuditEvent{
		ID: s.newID(), Type: typ, OccurredAt: at, UserID: userID, SessionID: sessionID,
		IP: m.IP, UserAgent: m.userAgent(), RequestID: m.RequestID, Data: raw,
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Session is the store's record as the flows hand it out; the alias keeps
// the transport from depending on the storage package.
type Session = store.Session

// Account is an account as the service hands it out: everything the
// transport and the command line show of it, and never the password hash,
// which no caller outside this package has any use for.
type Account struct {
	ID              string
	Email           string
	Name            string
	Role            string
	Status          string
	EmailVerifiedAt *time.Time
	TenantID        string
	OrganizationID  string
	CreatedAt       time.Time
}

func accountOf(u store.User) Account {
	return Account{
		ID: u.ID, Email: u.Email, Name: u.Name, Role: u.Role, Status: u.Status, EmailVerifiedAt: u.EmailVerifiedAt,
		TenantID: u.TenantID, OrganizationID: u.OrganizationID, CreatedAt: u.CreatedAt,
	}
}

// Account status values, for the transport.
const (
	StatusEnabled  = store.StatusEnabled
	StatusDisabled = store.StatusDisabled
)
