package auth

import (
	"context"
	"errors"

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
	limit, err := pageSize(in.Limit)
	if err != nil {
		return DeliveryPage{}, err
	}
	f := store.WebhookDeliveryFilter{EndpointID: endpointID, Status: in.Status, Limit: limit + 1}
	if in.Cursor != "" {
		at, id, err := decodeCursor(cursorDeliveries, in.Cursor)
		if err != nil {
			return DeliveryPage{}, err
		}
		f.After = &store.PageCursor{CreatedAt: at, ID: id}
	}
	ds, err := s.st.ListWebhookDeliveries(ctx, f)
	if err != nil {
		return DeliveryPage{}, apperr.Internal(err)
	}
	page := DeliveryPage{Deliveries: ds}
	if len(ds) > limit {
		page.Deliveries = ds[:limit]
		last := page.Deliveries[limit-1]
		page.Next = encodeCursor(cursorDeliveries, last.CreatedAt, last.ID)
	}
	return page, nil
}

// AdminRedeliver makes a delivery pending again, due now, with the same
// event (and so the same event id in its body), audits
// webhook.redelivered, and wakes the dispatcher.
func (s *Service) AdminRedeliver(ctx context.Context, a Actor, deliveryID string, m Meta) error {
	if err := AuthorizeAdmin(a); err != nil {
		return err
	}
	now := s.clock()
	err := s.st.InTx(ctx, func(q store.Queries) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
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
