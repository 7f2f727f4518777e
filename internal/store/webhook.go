package store

import (
	"context"
	"time"
)

// Webhook endpoint statuses and signature formats (API.md section 5).
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"

	WebhookFormatSeed     = "seed"
	WebhookFormatStandard = "standard-webhooks"
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// WebhookEvents is the catalogue of event types an endpoint may subscribe
// to; "*" subscribes to all of them. Audit entries of other types are never
// delivered.
var WebhookEvents = []string{
	"user.registered", "user.logged_in", "login.failed", "user.logged_out",
	"user.logged_out_all", "password.changed", "password.reset_requested",
	"password.reset", "email.verified", "refresh_token.used",
	"refresh_token.reused", "session.revoked", "user.disabled", "user.enabled",
	"signing_key.rotated", "signing_key.revoked",
}

// WebhookEndpoint is a registered receiver. Its secrets are sealed under
// the key-encryption key before they reach the store.
type WebhookEndpoint struct {
	ID          string
	URL         string
	Events      []string // event types, or ["*"]
	Description string
	Format      string // WebhookFormatSeed or WebhookFormatStandard
	Status      string // WebhookEnabled or WebhookDisabled
	Secret      []byte // sealed; the secret deliveries sign with once PreviousUntil has passed
	// PreviousSecret, sealed, is the secret deliveries keep signing with
	// until PreviousUntil (a rotation's overlap); nil when there is none.
	PreviousSecret []byte
	PreviousUntil  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// WebhookEndpointFilter pages through endpoints, oldest first:
// (CreatedAt, ID) ascending.
type WebhookEndpointFilter struct {
	Limit int
	After *PageCursor
}

// PageCursor is a position in a list ordered by time, then ID: At is the
// CreatedAt of the last entry seen (the OccurredAt of an audit entry).
type PageCursor struct {
	At time.Time
	ID string
}

// WebhookDelivery is one event to deliver to one endpoint. Its ID is the
// delivery's; EventID is the audit entry's, the same on every attempt and
// the body's "id".
type WebhookDelivery struct {
	ID             string
	EndpointID     string
	EventID        string
	EventType      string
	Status         string // DeliveryPending, DeliveryDelivered or DeliveryFailed
	Attempts       int
	NextAttemptAt  *time.Time // when pending
	LeaseUntil     *time.Time // while a dispatcher holds it
	LastAttemptAt  *time.Time
	LastStatusCode int // 0 when no HTTP answer
	LastError      string
	CreatedAt      time.Time
}

// WebhookDeliveryFilter pages through one endpoint's deliveries, newest
// first: (CreatedAt, ID) descending. Status "" does not filter.
type WebhookDeliveryFilter struct {
	EndpointID string
	Status     string
	Limit      int
	After      *PageCursor
}

// ClaimedDelivery is a leased delivery with what sending it needs.
type ClaimedDelivery struct {
	Delivery WebhookDelivery
	Endpoint WebhookEndpoint
	Event    AuditEvent
}

// WebhookAttempt is the outcome of one attempt of a leased delivery.
type WebhookAttempt struct {
	At         time.Time
	StatusCode int    // 0 when no HTTP answer
	Error      string // "" on success; never a secret or the body
	// Status is the delivery's status after the attempt: delivered,
	// failed (no more attempts), or pending with NextAttemptAt.
	Status        string
	NextAttemptAt time.Time
}

// WebhookQueries are the operations of the webhook registry and outbox.
//
// The outbox is filled by the store itself: every audit entry whose type is
// in WebhookEvents, however it is written (AppendAudit, UserTx.AppendAudit,
// RotateRefreshToken, ...), becomes one pending delivery per enabled
// endpoint subscribed to its type, in the same transaction and without a
// further round trip to the database.
type WebhookQueries interface {
	// CreateWebhookEndpoint inserts e.
	CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) error
	// WebhookEndpointByID returns the endpoint or ErrNotFound.
	WebhookEndpointByID(ctx context.Context, id string) (WebhookEndpoint, error)
	// ListWebhookEndpoints returns endpoints matching f, oldest first.
	ListWebhookEndpoints(ctx context.Context, f WebhookEndpointFilter) ([]WebhookEndpoint, error)
	// UpdateWebhookEndpoint replaces the mutable fields of the endpoint
	// e.ID (URL, Events, Description, Status, Secret, PreviousSecret,
	// PreviousUntil, UpdatedAt). ErrNotFound when absent.
	UpdateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) error
	// DeleteWebhookEndpoint deletes the endpoint and its deliveries, so
	// nothing more is sent to it. ErrNotFound when absent.
	DeleteWebhookEndpoint(ctx context.Context, id string) error

	// WebhookDeliveryByID returns the delivery or ErrNotFound.
	WebhookDeliveryByID(ctx context.Context, id string) (WebhookDelivery, error)
	// ListWebhookDeliveries returns deliveries matching f, newest first.
	ListWebhookDeliveries(ctx context.Context, f WebhookDeliveryFilter) ([]WebhookDelivery, error)
	// RetryWebhookDelivery makes a finished or pending delivery pending
	// again, due at now, with its lease cleared. ErrNotFound when absent.
	RetryWebhookDelivery(ctx context.Context, id string, now time.Time) error
	// ClaimWebhookDeliveries leases at most limit pending deliveries due
	// at now whose lease is free or expired, oldest due first, until
	// now+lease. Concurrent claimers (other replicas) never lease the same
	// delivery at once. An endpoint holds at most perEndpoint leases at
	// once, counting those it already holds (with any claimer), so that a
	// dead endpoint cannot take every slot. Deliveries of a disabled
	// endpoint are not claimed: they wait until it is enabled again.
	ClaimWebhookDeliveries(ctx context.Context, now time.Time, limit, perEndpoint int, lease time.Duration) ([]ClaimedDelivery, error)
	// RecordWebhookAttempt records an attempt of a leased delivery and
	// releases the lease: attempts+1, the outcome, and the new status.
	// ErrNotFound when the delivery is absent or no longer pending (another
	// claimer finished it after this one's lease lapsed); it is then left
	// as it is.
	RecordWebhookAttempt(ctx context.Context, id string, a WebhookAttempt) error
	// ReleaseWebhookDelivery gives a leased delivery back untried (at
	// shutdown), due at once. ErrNotFound when it is absent or no longer
	// pending.
	ReleaseWebhookDelivery(ctx context.Context, id string) error
	// PruneWebhookDeliveries deletes delivered and failed deliveries
	// created before before, and returns how many.
	PruneWebhookDeliveries(ctx context.Context, before time.Time) (int, error)
	// OldestPendingWebhookDelivery returns the creation time of the oldest
	// pending delivery of an enabled endpoint, or nil when none is pending.
	OldestPendingWebhookDelivery(ctx context.Context) (*time.Time, error)
}
