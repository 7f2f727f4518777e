package sqlstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// dueCandidates selects the ids a claim may lease, oldest due first: due
// pending deliveries of enabled endpoints whose lease is free or lapsed,
// ranked within their endpoint after the leases the endpoint already has,
// so that an endpoint holds at most perEndpoint leases at once whichever
// dispatcher holds them: a dead endpoint with thousands of due deliveries
// (each attempt waiting for the timeout) cannot take every slot.
// Arguments: now (leases held), now (due), now (lease lapsed),
// perEndpoint, limit.
const dueCandidates = `SELECT c.id FROM (
		SELECT d.id, d.next_attempt_at,
			ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) + COALESCE(l.n, 0) AS place
		FROM webhook_deliveries d
		JOIN webhook_endpoints e ON e.id = d.endpoint_id
		LEFT JOIN (
			SELECT endpoint_id, COUNT(*) AS n FROM webhook_deliveries
			WHERE lease_until > ? AND status = 'pending'
			GROUP BY endpoint_id
		) l ON l.endpoint_id = d.endpoint_id
		WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
			AND e.status = 'enabled'
	) c
	WHERE c.place <= ?
	ORDER BY c.next_attempt_at, c.id
	LIMIT ?`

// claimedColumns are what a claim returns about each delivery c, its
// endpoint e and its event a, under names that do not collide.
const claimedColumns = `c.id AS d_id, c.endpoint_id AS d_endpoint_id, c.event_id AS d_event_id,
	c.event_type AS d_event_type, c.status AS d_status, c.attempts AS d_attempts,
	c.next_attempt_at AS d_next_attempt_at, c.lease_until AS d_lease_until,
	c.last_attempt_at AS d_last_attempt_at, c.last_status_code AS d_last_status_code,
	c.last_error AS d_last_error, c.created_at AS d_created_at,
	e.id AS e_id, e.url AS e_url, e.events AS e_events, e.description AS e_description,
	e.format AS e_format, e.status AS e_status, e.secret AS e_secret,
	e.previous_secret AS e_previous_secret, e.previous_until AS e_previous_until,
	e.created_at AS e_created_at, e.updated_at AS e_updated_at,
	a.id AS a_id, a.type AS a_type, a.occurred_at AS a_occurred_at, a.user_id AS a_user_id,
	a.session_id AS a_session_id, a.actor_id AS a_actor_id, a.ip AS a_ip,
	a.user_agent AS a_user_agent, a.request_id AS a_request_id, a.data AS a_data`

// claimedRow is one row of claimedColumns.
type claimedRow struct {
	DID             string     `db:"d_id"`
	DEndpointID     string     `db:"d_endpoint_id"`
	DEventID        string     `db:"d_event_id"`
	DEventType      string     `db:"d_event_type"`
	DStatus         string     `db:"d_status"`
	DAttempts       int        `db:"d_attempts"`
	DNextAttemptAt  *time.Time `db:"d_next_attempt_at"`
	DLeaseUntil     *time.Time `db:"d_lease_until"`
	DLastAttemptAt  *time.Time `db:"d_last_attempt_at"`
	DLastStatusCode int        `db:"d_last_status_code"`
	DLastError      string     `db:"d_last_error"`
	DCreatedAt      time.Time  `db:"d_created_at"`

	EID             string     `db:"e_id"`
	EURL            string     `db:"e_url"`
	EEvents         string     `db:"e_events"`
	EDescription    string     `db:"e_description"`
	EFormat         string     `db:"e_format"`
	EStatus         string     `db:"e_status"`
	ESecret         []byte     `db:"e_secret"`
	EPreviousSecret []byte     `db:"e_previous_secret"`
	EPreviousUntil  *time.Time `db:"e_previous_until"`
	ECreatedAt      time.Time  `db:"e_created_at"`
	EUpdatedAt      time.Time  `db:"e_updated_at"`

	AID         string    `db:"a_id"`
	AType       string    `db:"a_type"`
	AOccurredAt time.Time `db:"a_occurred_at"`
	AUserID     string    `db:"a_user_id"`
	ASessionID  string    `db:"a_session_id"`
	AActorID    string    `db:"a_actor_id"`
	AIP         string    `db:"a_ip"`
	AUserAgent  string    `db:"a_user_agent"`
	ARequestID  string    `db:"a_request_id"`
	AData       []byte    `db:"a_data"`
}

func (r claimedRow) claimed() (store.ClaimedDelivery, error) {
	d := deliveryRow{
		ID: r.DID, EndpointID: r.DEndpointID, EventID: r.DEventID, EventType: r.DEventType,
		Status: r.DStatus, Attempts: r.DAttempts, NextAttemptAt: r.DNextAttemptAt, LeaseUntil: r.DLeaseUntil,
		LastAttemptAt: r.DLastAttemptAt, LastStatusCode: r.DLastStatusCode, LastError: r.DLastError,
		CreatedAt: r.DCreatedAt,
	}
	e, err := endpointRow{
		ID: r.EID, URL: r.EURL, Events: r.EEvents, Description: r.EDescription, Format: r.EFormat,
		Status: r.EStatus, Secret: r.ESecret, PreviousSecret: r.EPreviousSecret,
		PreviousUntil: r.EPreviousUntil, CreatedAt: r.ECreatedAt, UpdatedAt: r.EUpdatedAt,
	}.endpoint()
	return store.ClaimedDelivery{
		Delivery: d.delivery(),
		Endpoint: e,
		Event: store.AuditEvent{
			ID: r.AID, Type: r.AType, OccurredAt: r.AOccurredAt, UserID: r.AUserID, SessionID: r.ASessionID,
			ActorID: r.AActorID, IP: r.AIP, UserAgent: r.AUserAgent, RequestID: r.ARequestID, Data: r.AData,
		},
	}, err
}

// ClaimWebhookDeliveries leases due deliveries. On PostgreSQL the
// candidates are locked with SKIP LOCKED and checked again once locked, so
// the dispatchers of several replicas lease disjoint sets without waiting
// on each other; a SQLite transaction holds the write lock from BEGIN,
// which serializes claimers anyway.
func (q *queries) ClaimWebhookDeliveries(ctx context.Context, now time.Time, limit, perEndpoint int, lease time.Duration) ([]store.ClaimedDelivery, error) {
	if limit <= 0 || perEndpoint <= 0 {
		return nil, nil
	}
	now, until := ts(now), ts(now.Add(lease))
	var rows []claimedRow
	var err error
	if q.dialect == Postgres {
		err = q.selectAll(ctx, &rows, `WITH claimed AS (
				UPDATE webhook_deliveries d SET lease_until = ?
				WHERE d.id IN (
					SELECT id FROM webhook_deliveries
					WHERE id IN (`+dueCandidates+`)
						AND status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
					FOR UPDATE SKIP LOCKED)
				RETURNING d.*
			)
			SELECT `+claimedColumns+` FROM claimed c
			JOIN webhook_endpoints e ON e.id = c.endpoint_id
			JOIN audit_events a ON a.id = c.event_id
			ORDER BY c.next_attempt_at, c.id`,
			until, now, now, now, perEndpoint, limit, now, now)
	} else {
		err = q.atomic(ctx, func(q *queries) error {
			var ids []string
			if err := q.selectAll(ctx, &ids, `UPDATE webhook_deliveries SET lease_until = ?
				WHERE id IN (`+dueCandidates+`) RETURNING id`,
				until, now, now, now, perEndpoint, limit); err != nil || len(ids) == 0 {
				return err
			}
			list, _ := json.Marshal(ids) // a []string always marshals
			return q.selectAll(ctx, &rows, `SELECT `+claimedColumns+` FROM webhook_deliveries c
				JOIN webhook_endpoints e ON e.id = c.endpoint_id
				JOIN audit_events a ON a.id = c.event_id
				WHERE c.id IN (SELECT value FROM json_each(?))
				ORDER BY c.next_attempt_at, c.id`, string(list))
		})
	}
	if err != nil {
		return nil, err
	}
	out := make([]store.ClaimedDelivery, 0, len(rows))
	for _, r := range rows {
		c, err := r.claimed()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
