package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// The outbox is filled by a trigger on audit_events (migration 00007), not
// here: every path that writes an audit entry, the one-statement refresh
// rotation included, queues its deliveries in the same statement.

const endpointColumns = `id, url, events, description, format, status, secret, previous_secret, previous_until, created_at, updated_at`

const deliveryColumns = `id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, lease_until,
	last_attempt_at, last_status_code, last_error, created_at`

// endpointRow is a webhook_endpoints row as the database holds it.
type endpointRow struct {
	ID             string     `db:"id"`
	URL            string     `db:"url"`
	Events         string     `db:"events"`
	Description    string     `db:"description"`
	Format         string     `db:"format"`
	Status         string     `db:"status"`
	Secret         []byte     `db:"secret"`
	PreviousSecret []byte     `db:"previous_secret"`
	PreviousUntil  *time.Time `db:"previous_until"`
	CreatedAt      time.Time  `db:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at"`
}

func (r endpointRow) endpoint() (store.WebhookEndpoint, error) {
	e := store.WebhookEndpoint{
		ID: r.ID, URL: r.URL, Description: r.Description, Format: r.Format, Status: r.Status,
		Secret: r.Secret, PreviousSecret: r.PreviousSecret, PreviousUntil: r.PreviousUntil,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if len(e.PreviousSecret) == 0 {
		e.PreviousSecret = nil
	}
	if err := json.Unmarshal([]byte(r.Events), &e.Events); err != nil {
		return e, fmt.Errorf("sqlstore: webhook endpoint %s: events: %w", r.ID, err)
	}
	return e, nil
}

// eventsJSON is the events column of e: a JSON array, never null.
func eventsJSON(events []string) string {
	if events == nil {
		events = []string{}
	}
	b, _ := json.Marshal(events) // a []string always marshals
	return string(b)
}

// nilIfEmpty stores an absent secret as NULL.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// deliveryRow is a webhook_deliveries row as the database holds it.
type deliveryRow struct {
	ID             string     `db:"id"`
	EndpointID     string     `db:"endpoint_id"`
	EventID        string     `db:"event_id"`
	EventType      string     `db:"event_type"`
	Status         string     `db:"status"`
	Attempts       int        `db:"attempts"`
	NextAttemptAt  *time.Time `db:"next_attempt_at"`
	LeaseUntil     *time.Time `db:"lease_until"`
	LastAttemptAt  *time.Time `db:"last_attempt_at"`
	LastStatusCode int        `db:"last_status_code"`
	LastError      string     `db:"last_error"`
	CreatedAt      time.Time  `db:"created_at"`
}

func (r deliveryRow) delivery() store.WebhookDelivery {
	return store.WebhookDelivery{
		ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, EventType: r.EventType,
		Status: r.Status, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt, LeaseUntil: r.LeaseUntil,
		LastAttemptAt: r.LastAttemptAt, LastStatusCode: r.LastStatusCode, LastError: r.LastError,
		CreatedAt: r.CreatedAt,
	}
}

func (q *queries) CreateWebhookEndpoint(ctx context.Context, e store.WebhookEndpoint) error {
	_, err := q.exec(ctx, `INSERT INTO webhook_endpoints (`+endpointColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.URL, eventsJSON(e.Events), e.Description, e.Format, e.Status, e.Secret,
		nilIfEmpty(e.PreviousSecret), tsp(e.PreviousUntil), ts(e.CreatedAt), ts(e.UpdatedAt))
	return err
}

func (q *queries) WebhookEndpointByID(ctx context.Context, id string) (store.WebhookEndpoint, error) {
	var r endpointRow
	if err := q.get(ctx, &r, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = ?`, id); err != nil {
		return store.WebhookEndpoint{}, err
	}
	return r.endpoint()
}

func (q *queries) ListWebhookEndpoints(ctx context.Context, f store.WebhookEndpointFilter) ([]store.WebhookEndpoint, error) {
	where, args := afterCursor(nil, nil, "created_at", false, f.After)
	args = append(args, pageLimit(f.Limit))
	var rows []endpointRow
	if err := q.selectAll(ctx, &rows, pageQuery(`SELECT `+endpointColumns+` FROM webhook_endpoints`, where, "created_at, id"), args...); err != nil {
		return nil, err
	}
	out := make([]store.WebhookEndpoint, 0, len(rows))
	for _, r := range rows {
		e, err := r.endpoint()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (q *queries) UpdateWebhookEndpoint(ctx context.Context, e store.WebhookEndpoint) error {
	return q.changeOne(ctx, `UPDATE webhook_endpoints SET url = ?, events = ?, description = ?, status = ?,
			secret = ?, previous_secret = ?, previous_until = ?, updated_at = ?
		WHERE id = ?`,
		e.URL, eventsJSON(e.Events), e.Description, e.Status, e.Secret, nilIfEmpty(e.PreviousSecret),
		tsp(e.PreviousUntil), ts(e.UpdatedAt), e.ID)
}

func (q *queries) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	// The foreign key cascades to the endpoint's deliveries.
	return q.changeOne(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`, id)
}

// changeOne runs a statement that must change a row: ErrNotFound when it
// changed none.
func (q *queries) changeOne(ctx context.Context, query string, args ...any) error {
	n, err := q.exec(ctx, query, args...)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

func (q *queries) WebhookDeliveryByID(ctx context.Context, id string) (store.WebhookDelivery, error) {
	var r deliveryRow
	err := q.get(ctx, &r, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id)
	return r.delivery(), err
}

func (q *queries) ListWebhookDeliveries(ctx context.Context, f store.WebhookDeliveryFilter) ([]store.WebhookDelivery, error) {
	where := []string{"endpoint_id = ?"}
	args := []any{f.EndpointID}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	where, args = afterCursor(where, args, "created_at", true, f.After)
	args = append(args, pageLimit(f.Limit))
	var rows []deliveryRow
	err := q.selectAll(ctx, &rows, pageQuery(`SELECT `+deliveryColumns+` FROM webhook_deliveries`, where, "created_at DESC, id DESC"), args...)
	if err != nil {
		return nil, err
	}
	out := make([]store.WebhookDelivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.delivery())
	}
	return out, nil
}

func (q *queries) RetryWebhookDelivery(ctx context.Context, id string, now time.Time) error {
	return q.changeOne(ctx, `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, lease_until = NULL WHERE id = ?`,
		store.DeliveryPending, ts(now), id)
}

func (q *queries) RecordWebhookAttempt(ctx context.Context, id string, a store.WebhookAttempt) error {
	var next *time.Time
	switch a.Status {
	case store.DeliveryPending:
		next = tsp(&a.NextAttemptAt)
	case store.DeliveryDelivered, store.DeliveryFailed:
	default:
		return fmt.Errorf("sqlstore: record webhook attempt: unknown status %q", a.Status)
	}
	// Only a pending delivery records an attempt: one that another
	// dispatcher finished meanwhile (its lease had lapsed) keeps its outcome.
	return q.changeOne(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, status = ?, next_attempt_at = ?,
			lease_until = NULL, last_attempt_at = ?, last_status_code = ?, last_error = ?
		WHERE id = ? AND status = ?`,
		a.Status, next, ts(a.At), a.StatusCode, truncateText(a.Error, 1000), id, store.DeliveryPending)
}

func (q *queries) ReleaseWebhookDelivery(ctx context.Context, id string) error {
	// It was due when claimed, and still is: only the lease goes.
	return q.changeOne(ctx, `UPDATE webhook_deliveries SET lease_until = NULL WHERE id = ? AND status = ?`,
		id, store.DeliveryPending)
}

func (q *queries) PruneWebhookDeliveries(ctx context.Context, before time.Time) (int, error) {
	n, err := q.exec(ctx, `DELETE FROM webhook_deliveries WHERE status <> ? AND created_at < ?`,
		store.DeliveryPending, ts(before))
	return int(n), err
}

func (q *queries) OldestPendingWebhookDelivery(ctx context.Context) (*time.Time, error) {
	var oldest []time.Time
	err := q.selectAll(ctx, &oldest, `SELECT d.created_at FROM webhook_deliveries d
		JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.status = ? AND e.status = ?
		ORDER BY d.created_at LIMIT 1`, store.DeliveryPending, store.WebhookEnabled)
	if err != nil || len(oldest) == 0 {
		return nil, err
	}
	return &oldest[0], nil
}
