package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// The outbox side of the webhook admin flows: an endpoint's deliveries, and
// sending one again.

func errNoSuchDelivery() error {
	return apperr.New(apperr.KindNotFound, "not_found", "No such webhook delivery.")
}

// DeliveryQuery selects an endpoint's deliveries; Status "" does not
// filter.
type DeliveryQuery struct {
	Status string
	Limit  int // 0: DefaultPageSize
	Cursor string
}

// DeliveryPage is one page of deliveries, newest first; Next is "" on the
// last page.
type DeliveryPage struct {
	Deliveries []WebhookDelivery
	Next       string
}

// AdminWebhookDeliveries lists an endpoint's deliveries, newest first.
func (s *Service) AdminWebhookDeliveries(ctx context.Context, a Actor, endpointID string, in DeliveryQuery) (DeliveryPage, error) {
	if _, err := s.AdminWebhook(ctx, a, endpointID); err != nil {
		return DeliveryPage{}, err
	}
	switch in.Status {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryFailed:
	default:
		return DeliveryPage{}, errMalformedField("status", `status must be "pending", "delivered" or "failed".`)
	}
	ds, next, err := listPage(PageQuery{Limit: in.Limit, Cursor: in.Cursor}, cursorDeliveries,
		func(limit int, after *store.PageCursor) ([]store.WebhookDelivery, error) {
			return s.st.ListWebhookDeliveries(ctx, store.WebhookDeliveryFilter{EndpointID: endpointID, Status: in.Status, Limit: limit, After: after})
		},
		func(d store.WebhookDelivery) (time.Time, string) { return d.CreatedAt, d.ID })
	if err != nil {
		return DeliveryPage{}, err
	}
	return DeliveryPage{Deliveries: ds, Next: next}, nil
}

// AdminRedeliver makes a delivery pending again, due now, with the same
// event (and so the same event id in its body), audits
// webhook.redelivered, and wakes the dispatcher.
func (s *Service) AdminRedeliver(ctx context.Context, a Actor, deliveryID string, m Meta) error {
	if err := AuthorizeAdmin(a); err != nil {
		return err
	}
	now := s.clock()
	err := s.adminTx(ctx, a, func(q store.Queries) error {
		d, err := q.WebhookDeliveryByID(ctx, deliveryID)
		if err != nil {
			return err
		}
		if err := q.RetryWebhookDelivery(ctx, deliveryID, now); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.webhookEvent(EventWebhookRedelivered, now, m, a, map[string]any{
			"webhook_id": d.EndpointID, "delivery_id": d.ID, "event_id": d.EventID, "event_type": d.EventType,
		}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return errNoSuchDelivery()
	}
	if err != nil {
		return asAppErr(err)
	}
	s.webhookQueued()
	return nil
}
