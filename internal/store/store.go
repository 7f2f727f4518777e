// Package store owns the storage contract of the issuer: the records, the
// interfaces every backend implements, and the sentinel errors callers check
// with errors.Is. Backends live in subpackages and never import the domain.
//
// Lock order. Whatever writes a user's sessions, refresh tokens, password
// hash or status takes that user's row first, and every other row after
// it; writers of one user then queue on that row instead of deadlocking,
// and each sees what the one before it committed. The rule is an API, not
// a convention: those writes exist only on the UserTx that Store.WithUser
// hands out once it holds the row, and a UserTx writes no other user's
// rows. The policy (is the account enabled, is the password the one just
// checked) is the caller's, read from UserTx.User under the lock.
// Queries.RotateRefreshToken is the one exception, a single statement for
// the hottest flow, which takes the owner's row first too.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap them with %w; callers test with errors.Is.
var (
	// ErrNotFound means no record matched.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyExists means a unique key (an email, a kid, an idempotency key) is taken.
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrPrecondition means the record exists but is not in the state the
	// atomic operation requires (a refresh token already rotated or revoked).
	// Nothing was changed.
	ErrPrecondition = errors.New("store: precondition failed")
	// ErrUnavailable means the database could not be reached or is not
	// serving: a refused, reset or dropped connection, a server shutting
	// down or starting up, a dial or pool timeout. It is a condition of the
	// moment, not of the request: the same call may succeed later.
	ErrUnavailable = errors.New("store: database unavailable")
)

// Account status values.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
)

// User is an account. Optional text fields are "" when unset.
type User struct {
	ID              string     `db:"id"`
	Email           string     `db:"email"`
	EmailNormalized string     `db:"email_normalized"`
	PasswordHash    string     `db:"password_hash"`
	Name            string     `db:"name"`
	Role            string     `db:"role"`
	Status          string     `db:"status"`
	EmailVerifiedAt *time.Time `db:"email_verified_at"`
	TenantID        string     `db:"tenant_id"`
	OrganizationID  string     `db:"organization_id"`
	CreatedAt       time.Time  `db:"created_at"`
	UpdatedAt       time.Time  `db:"updated_at"`
}

// Session is one device login: one refresh-token family. ExpiresAt slides
// with every rotation; MaxExpiresAt, the session's absolute end, is fixed at
// login: neither ExpiresAt nor the expiry of any refresh token of the
// session goes past it, however often it is refreshed.
type Session struct {
	ID           string     `db:"id"`
	UserID       string     `db:"user_id"`
	DeviceID     string     `db:"device_id"`
	DeviceName   string     `db:"device_name"`
	UserAgent    string     `db:"user_agent"`
	IP           string     `db:"ip"`
	CreatedAt    time.Time  `db:"created_at"`
	LastUsedAt   time.Time  `db:"last_used_at"`
	ExpiresAt    time.Time  `db:"expires_at"`
	MaxExpiresAt time.Time  `db:"max_expires_at"`
	RevokedAt    *time.Time `db:"revoked_at"`
	RevokeReason string     `db:"revoke_reason"`
}

// RefreshToken is the stored form of a refresh token: never the token itself,
// only its SHA-256 (hex).
type RefreshToken struct {
	Hash       string     `db:"token_hash"`
	SessionID  string     `db:"session_id"`
	UserID     string     `db:"user_id"`
	ParentHash string     `db:"parent_hash"` // "" for the first token of a session
	IssuedAt   time.Time  `db:"issued_at"`
	ExpiresAt  time.Time  `db:"expires_at"`
	RotatedAt  *time.Time `db:"rotated_at"`
	RevokedAt  *time.Time `db:"revoked_at"`
}

// Rotation is what RotateRefreshToken reports: the presented token as it
// stood before the call, its owner after a rotation, and (when it had been
// rotated before) its child.
type Rotation struct {
	Token RefreshToken
	Child *RefreshToken // the token that replaced Token, when Token was rotated
	User  User          // the owner, set when the rotation succeeded; PasswordHash is left empty
	// NextExpiresAt is, when the rotation succeeded, the expiry the new
	// token was stored with: next.ExpiresAt capped at the session's
	// MaxExpiresAt.
	NextExpiresAt time.Time
}

// RotateRequest is a refresh-token rotation: the presented token, by its
// hash, and the successor that replaces it.
type RotateRequest struct {
	Hash string
	// Next is the successor: its Hash, IssuedAt and ExpiresAt (capped at
	// the session's MaxExpiresAt); session, user and parent come from the
	// presented token.
	Next RefreshToken
	Now  time.Time
	// IP and UserAgent are the client's, recorded on the session when not "".
	IP, UserAgent string
	// Event, when not nil, is appended with the rotation; its UserID and
	// SessionID, when empty, are taken from the token.
	Event *AuditEvent
}

// AuditEvent is one entry of the audit trail. Data never holds a secret.
type AuditEvent struct {
	ID         string    `db:"id"`
	Type       string    `db:"type"`
	OccurredAt time.Time `db:"occurred_at"`
	UserID     string    `db:"user_id"`
	SessionID  string    `db:"session_id"`
	ActorID    string    `db:"actor_id"` // who acted when not the user (an admin)
	IP         string    `db:"ip"`
	UserAgent  string    `db:"user_agent"`
	RequestID  string    `db:"request_id"`
	Data       []byte    `db:"data"` // a JSON object
}

// AuditFilter selects audit events; zero fields do not filter. Results are
// newest first; the cursor is the (OccurredAt, ID) of the last entry seen.
type AuditFilter struct {
	UserID string
	Type   string
	Since  time.Time // inclusive
	Until  time.Time // exclusive
	Limit  int
	After  *PageCursor
}

// SigningKey is an RS256 key pair. The private key is sealed (encrypted under
// the key-encryption key) before it reaches the store.
type SigningKey struct {
	KID         string     `db:"kid"`
	Algorithm   string     `db:"alg"`
	PublicJWK   []byte     `db:"public_jwk"`  // JSON
	PrivateSeal []byte     `db:"private_key"` // sealed PKCS#8
	CreatedAt   time.Time  `db:"created_at"`
	ActivatesAt time.Time  `db:"activates_at"` // signs from then on
	RetiresAt   *time.Time `db:"retires_at"`   // stops signing then
	ExpiresAt   *time.Time `db:"expires_at"`   // unpublished then: every token it signed has expired
	RevokedAt   *time.Time `db:"revoked_at"`   // out of the key set from then on, whatever the other times say
}

// Kinds of values sealed under the key-encryption key, by where they live.
const (
	SealedSigningKey      = "signing_key"             // signing_keys.private_key, by kid
	SealedMailToken       = "mail_token"              // mail_outbox.sealed_token, by mail id
	SealedWebhookSecret   = "webhook_secret"          // webhook_endpoints.secret, by endpoint id
	SealedWebhookPrevious = "webhook_previous_secret" // webhook_endpoints.previous_secret, by endpoint id
)

// SealedValue is one value sealed under the key-encryption key.
type SealedValue struct {
	Kind   string `db:"kind"` // SealedSigningKey, SealedMailToken, ...
	ID     string `db:"id"`
	Sealed []byte `db:"sealed"`
}

// IdempotencyRecord is a remembered response to a request carrying an
// Idempotency-Key. Status 0 means the first request is still running.
type IdempotencyRecord struct {
	Scope       string    `db:"scope"`
	Key         string    `db:"idem_key"`
	RequestHash string    `db:"request_hash"`
	Status      int       `db:"status"`
	Body        []byte    `db:"body"`
	CreatedAt   time.Time `db:"created_at"`
}

// Queries is every operation of the store but the writes of a user's
// sessions, tokens, password and status, which are UserTx's. It runs on its
// own (each call is atomic) or inside Store.InTx, where all calls share one
// transaction.
type Queries interface {
	AccountQueries
	AdminQueries
	WebhookQueries
	RevocationQueries

	// CreateUser inserts u. ErrAlreadyExists when EmailNormalized is taken.
	CreateUser(ctx context.Context, u User) error
	// UserByID returns the user or ErrNotFound.
	UserByID(ctx context.Context, id string) (User, error)
	// UserByEmail looks the user up by normalized email, or ErrNotFound.
	UserByEmail(ctx context.Context, emailNormalized string) (User, error)

	// SessionByID returns the session or ErrNotFound.
	SessionByID(ctx context.Context, id string) (Session, error)
	// ActiveSessionByDevice returns the user's unrevoked, unexpired session for
	// deviceID, or ErrNotFound.
	ActiveSessionByDevice(ctx context.Context, userID, deviceID string, now time.Time) (Session, error)
	// ActiveSessions lists the user's unrevoked, unexpired sessions, newest
	// first, at most limit of them.
	ActiveSessions(ctx context.Context, userID string, now time.Time, limit int) ([]Session, error)

	// RefreshTokenByHash returns the token or ErrNotFound.
	RefreshTokenByHash(ctx context.Context, hash string) (RefreshToken, error)
	// RotateRefreshToken atomically replaces the token r.Hash with r.Next
	// (same session and user): only when the token is neither rotated nor
	// revoked nor expired at r.Now, and its owner is enabled, does it mark
	// it rotated, insert r.Next with its ExpiresAt capped at the session's
	// MaxExpiresAt, extend the session (last_used_at = r.Now, expires_at =
	// that capped expiry, ip/user agent when given) and append r.Event.
	// The Rotation it returns then holds the capped expiry in
	// NextExpiresAt. All of that happens or none of it. Of any number of
	// concurrent rotations of one token exactly one succeeds. Otherwise
	// nothing changes and it returns the Rotation as found with
	// ErrPrecondition (ErrNotFound when the hash is unknown).
	//
	// It is the one writer of a user's rows outside WithUser, kept as one
	// statement on PostgreSQL (one round trip) because refresh is the
	// hottest flow; it holds to the lock order all the same: the owner's
	// row first (FOR KEY SHARE, which a WithUser of that user waits for),
	// then the token's, so it queues behind a WithUser instead of
	// deadlocking with it, and one that waited for a disable rotates
	// nothing.
	RotateRefreshToken(ctx context.Context, r RotateRequest) (Rotation, error)

	// AppendAudit records an event.
	AppendAudit(ctx context.Context, e AuditEvent) error
	// ListAudit returns events matching f, newest first, at most f.Limit.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEvent, error)

	// CreateSigningKey inserts k. ErrAlreadyExists when the kid is taken.
	CreateSigningKey(ctx context.Context, k SigningKey) error
	// SigningKeys returns every key not yet expired at now, oldest first.
	SigningKeys(ctx context.Context, now time.Time) ([]SigningKey, error)
	// RetireSigningKeys sets retires_at = at and expires_at = expires on every
	// key other than exceptKID that has no retires_at yet, is not revoked and
	// activates at or before at. It returns the kids it retired.
	RetireSigningKeys(ctx context.Context, at, expires time.Time, exceptKID string) ([]string, error)
	// LockSigningKeys serializes key creation among instances until the end of
	// the transaction. Only meaningful inside InTx.
	LockSigningKeys(ctx context.Context) error
	// RevokeSigningKey sets revoked_at = at and expires_at = expires on the
	// key kid unless it is revoked already. It reports whether it changed
	// anything; ErrNotFound when there is no such key. Of concurrent
	// revocations of one key exactly one reports true.
	RevokeSigningKey(ctx context.Context, kid string, at, expires time.Time) (bool, error)
	// RescheduleSigningKey sets the activation, retirement and expiry of the
	// unrevoked key kid. ErrNotFound when there is no such key, or it is
	// revoked.
	RescheduleSigningKey(ctx context.Context, kid string, activates time.Time, retires, expires *time.Time) error
	// SealedValues returns every value sealed under the key-encryption key:
	// signing keys' private halves, queued mails' link tokens and webhook
	// endpoints' secrets (current and previous), by kind and id.
	SealedValues(ctx context.Context) ([]SealedValue, error)
	// ReplaceSealedValue sets the value of (v.Kind, v.ID) to v.Sealed when
	// it still holds old. ErrPrecondition when it holds something else or is
	// gone (a mail sent, a secret rotated meanwhile).
	ReplaceSealedValue(ctx context.Context, v SealedValue, old []byte) error

	// ReserveIdempotencyKey inserts r (Status 0) unless a record for
	// (Scope, Key) newer than notBefore exists; then it returns that record with
	// ErrAlreadyExists. Older records are replaced.
	ReserveIdempotencyKey(ctx context.Context, r IdempotencyRecord, notBefore time.Time) (IdempotencyRecord, error)
	// TakeOverIdempotencyKey hands an abandoned reservation to a new request:
	// the record for (scope, key) that is still unfinished (Status 0), has
	// requestHash and was created before staleBefore gets CreatedAt at and
	// belongs to the caller from then on. ErrNotFound when there is no such
	// record, so of concurrent takers exactly one wins.
	TakeOverIdempotencyKey(ctx context.Context, scope, key, requestHash string, staleBefore, at time.Time) error
	// CompleteIdempotencyKey stores the response of the reservation of
	// (scope, key) created at reservedAt. ErrNotFound when that reservation
	// is gone or was taken over.
	CompleteIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time, status int, body []byte) error
	// ReleaseIdempotencyKey forgets the reservation of (scope, key) created at
	// reservedAt, whose request failed, so the client may retry. A
	// reservation that is gone or was taken over is left alone.
	ReleaseIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time) error
}

// Store is a backend: Queries plus transactions and lifecycle.
type Store interface {
	Queries
	// InTx runs fn in one transaction: committed when fn returns nil, rolled
	// back otherwise. fn must use only the Queries it is given.
	InTx(ctx context.Context, fn func(Queries) error) error
	// WithUser runs fn in one transaction that first takes the row of the
	// user userID (SELECT ... FOR UPDATE on PostgreSQL; the database's
	// write lock, taken at BEGIN, on SQLite) and only then hands fn the
	// UserTx of that user: committed when fn returns nil, rolled back
	// otherwise. ErrNotFound, and fn is not called, when there is no such
	// user. Every writer of a user's sessions, refresh tokens, password or
	// status goes through it (RotateRefreshToken is the one exception,
	// and takes the row first too), so they run one at a time per user
	// and never deadlock.
	WithUser(ctx context.Context, userID string, fn func(UserTx) error) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the connections.
	Close() error
}
