package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/netguard"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/pkg/webhook"
)

// Audit event types of the webhook registry. They are audit-only: none is
// in store.WebhookEvents, so registering an endpoint is never itself
// delivered to one.
const (
	EventWebhookCreated       = "webhook.created"
	EventWebhookUpdated       = "webhook.updated"
	EventWebhookDeleted       = "webhook.deleted"
	EventWebhookSecretRotated = "webhook.secret_rotated"
	EventWebhookRedelivered   = "webhook.redelivered"
)

// Webhook endpoint statuses, formats and delivery statuses, for the
// transport.
const (
	WebhookEnabled        = store.WebhookEnabled
	WebhookDisabled       = store.WebhookDisabled
	WebhookFormatSeed     = store.WebhookFormatSeed
	WebhookFormatStandard = store.WebhookFormatStandard
	DeliveryPending       = store.DeliveryPending
	DeliveryDelivered     = store.DeliveryDelivered
	DeliveryFailed        = store.DeliveryFailed
)

// WebhookEndpoint and WebhookDelivery are the store's records as the admin
// flows hand them out. An endpoint's secrets are sealed; the transport
// never shows them.
type (
	WebhookEndpoint = store.WebhookEndpoint
	WebhookDelivery = store.WebhookDelivery
)

// URLChecker applies the outbound URL rules (API.md section 5) at
// registration; *netguard.Guard is one.
type URLChecker interface {
	CheckURL(ctx context.Context, raw string) error
}

// DefaultSecretOverlap is how long a rotated-out secret keeps signing when
// the rotation names no overlap: a day, time for a receiver to add the new
// one.
const DefaultSecretOverlap = 24 * time.Hour

// MaxSecretOverlap bounds a rotation's overlap.
const MaxSecretOverlap = 30 * 24 * time.Hour

// Bounds of an endpoint's fields.
const (
	maxWebhookURLLen         = 2048
	maxWebhookDescriptionLen = 500
)

// List names of the webhook cursors (see cursor).
const (
	cursorWebhooks   = "webhooks"
	cursorDeliveries = "webhook_deliveries"
)

// WebhookSealContext is what an endpoint's secrets (current and previous)
// are sealed to: the endpoint's id, so a sealed secret copied onto another
// endpoint's row does not open. The sealed plaintext is the secret exactly
// as it was shown, "whsec_..." included for the standard-webhooks format.
func WebhookSealContext(endpointID string) string { return "webhook-secret:" + endpointID }

func errNoSuchWebhook() error {
	return apperr.New(apperr.KindNotFound, "not_found", "No such webhook endpoint.")
}

// WebhookInput registers an endpoint. Format "" is the seed format.
type WebhookInput struct {
	URL         string
	Events      []string
	Description string
	Format      string
}

// WebhookPatch changes an endpoint: nil fields stay as they are.
type WebhookPatch struct {
	URL         *string
	Events      []string // nil: unchanged
	Description *string
	Status      *string
}

// NewWebhook is a registered endpoint and its secret, shown this once.
type NewWebhook struct {
	Endpoint WebhookEndpoint
	Secret   string
}

// webhookRules collects the broken rules of an endpoint's fields.
type webhookRules struct{ fields []apperr.FieldError }

func (r *webhookRules) add(field, code, msg string) {
	r.fields = append(r.fields, apperr.FieldError{Field: field, Code: code, Message: msg})
}

// err is nil when no rule broke, else validation_failed of kind k listing
// every broken rule.
func (r *webhookRules) err(k apperr.Kind) error {
	if len(r.fields) == 0 {
		return nil
	}
	e := apperr.New(k, "validation_failed", "The webhook endpoint is not valid.")
	e.Fields = r.fields
	return e
}

// checkURL applies the URL rules. A failure of the lookup itself (not a
// refusal) is a fault of ours, returned as such.
func (s *Service) checkURL(ctx context.Context, r *webhookRules, raw string) error {
	switch {
	case raw == "":
		r.add("url", "required", "A URL is required.")
		return nil
	case len(raw) > maxWebhookURLLen || !validText(raw, maxWebhookURLLen):
		r.add("url", "invalid", "The URL must be at most 2048 printable characters.")
		return nil
	}
	if s.urls == nil {
		return errors.New("auth: no URL checker configured for webhooks")
	}
	err := s.urls.CheckURL(ctx, raw)
	switch {
	case err == nil:
	case errors.Is(err, netguard.ErrInvalidURL):
		r.add("url", "invalid", "The URL must be an absolute https URL with a host and without user-info.")
	case errors.Is(err, netguard.ErrBlockedAddress):
		r.add("url", "blocked_address", "The URL's host is, or resolves to, an address webhooks may not reach (loopback, private, link-local, ...); see --webhook-allow-cidr.")
	default:
		return err
	}
	return nil
}

// checkEvents validates a subscription and returns it without duplicates.
func checkEvents(r *webhookRules, events []string) []string {
	if len(events) == 0 {
		r.add("events", "required", `At least one event type, or ["*"], is required.`)
		return nil
	}
	if slices.Contains(events, "*") {
		if len(events) != 1 {
			r.add("events", "invalid", `"*" subscribes to every type and stands alone.`)
			return nil
		}
		return []string{"*"}
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(store.WebhookEvents, e) {
			r.add("events", "unknown_event", "Unknown event type; see the README's event catalogue.")
			return nil
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

func checkDescription(r *webhookRules, d string) {
	if !validText(d, maxWebhookDescriptionLen) {
		r.add("description", "invalid", "The description must be at most 500 printable characters.")
	}
}

// newWebhookSecret returns a secret of 256 random bits in the format's
// form: base64url for the seed format, "whsec_" and base64 for Standard
// Webhooks.
func newWebhookSecret(rand io.Reader, format string) (string, error) {
	if format == store.WebhookFormatStandard {
		return webhook.NewStandardSecret(rand)
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// webhookEvent is the audit entry of an admin action on an endpoint. Its
// data never holds a secret.
func (s *Service) webhookEvent(typ string, at time.Time, m Meta, a Actor, data map[string]any) store.AuditEvent {
	return s.adminEvent(typ, at, m, a, "", data)
}

// AdminCreateWebhook registers an endpoint and returns it with its secret,
// which is stored only sealed and never shown again. The endpoint and its
// webhook.created audit entry commit together.
func (s *Service) AdminCreateWebhook(ctx context.Context, a Actor, in WebhookInput, m Meta) (NewWebhook, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return NewWebhook{}, err
	}
	var rules webhookRules
	if err := s.checkURL(ctx, &rules, in.URL); err != nil {
		return NewWebhook{}, apperr.Internal(err)
	}
	events := checkEvents(&rules, in.Events)
	checkDescription(&rules, in.Description)
	format := in.Format
	switch format {
	case "":
		format = store.WebhookFormatSeed
	case store.WebhookFormatSeed, store.WebhookFormatStandard:
	default:
		rules.add("format", "invalid", `format must be "seed" or "standard-webhooks".`)
	}
	if err := rules.err(apperr.KindInvalid); err != nil {
		return NewWebhook{}, err
	}
	secret, err := newWebhookSecret(s.rand, format)
	if err != nil {
		return NewWebhook{}, apperr.Internal(err)
	}
	now := s.clock()
	e := store.WebhookEndpoint{
		ID: s.newID(), URL: in.URL, Events: events, Description: in.Description, Format: format,
		Status: store.WebhookEnabled, CreatedAt: now, UpdatedAt: now,
	}
	if e.Secret, err = s.sealer.Seal([]byte(secret), WebhookSealContext(e.ID)); err != nil {
		return NewWebhook{}, apperr.Internal(err)
	}
	err = s.adminTx(ctx, a, func(q store.Queries) error {
		if err := q.CreateWebhookEndpoint(ctx, e); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.webhookEvent(EventWebhookCreated, now, m, a, map[string]any{
			"webhook_id": e.ID, "url": e.URL, "events": e.Events, "format": e.Format,
		}))
	})
	if err != nil {
		return NewWebhook{}, asAppErr(err)
	}
	return NewWebhook{Endpoint: e, Secret: secret}, nil
}

// WebhookPage is one page of endpoints, oldest first; Next is "" on the
// last page.
type WebhookPage struct {
	Endpoints []WebhookEndpoint
	Next      string
}

// AdminWebhooks lists the endpoints, oldest first.
func (s *Service) AdminWebhooks(ctx context.Context, a Actor, pq PageQuery) (WebhookPage, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return WebhookPage{}, err
	}
	es, next, err := listPage(pq, cursorWebhooks,
		func(limit int, after *store.PageCursor) ([]store.WebhookEndpoint, error) {
			return s.st.ListWebhookEndpoints(ctx, store.WebhookEndpointFilter{Limit: limit, After: after})
		},
		func(e store.WebhookEndpoint) (time.Time, string) { return e.CreatedAt, e.ID })
	if err != nil {
		return WebhookPage{}, err
	}
	return WebhookPage{Endpoints: es, Next: next}, nil
}

// AdminWebhook returns one endpoint.
func (s *Service) AdminWebhook(ctx context.Context, a Actor, id string) (WebhookEndpoint, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return WebhookEndpoint{}, err
	}
	e, err := s.st.WebhookEndpointByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return WebhookEndpoint{}, errNoSuchWebhook()
	}
	if err != nil {
		return WebhookEndpoint{}, apperr.Internal(err)
	}
	return e, nil
}

// AdminUpdateWebhook changes an endpoint and audits webhook.updated with
// what changed. A disabled endpoint gets no new deliveries; those already
// queued for it stay pending until it is enabled again. Broken rules are
// validation_failed of kind Unprocessable, as for other changes.
func (s *Service) AdminUpdateWebhook(ctx context.Context, a Actor, id string, p WebhookPatch, m Meta) (WebhookEndpoint, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return WebhookEndpoint{}, err
	}
	var rules webhookRules
	if p.URL != nil {
		if err := s.checkURL(ctx, &rules, *p.URL); err != nil {
			return WebhookEndpoint{}, apperr.Internal(err)
		}
	}
	var events []string
	if p.Events != nil {
		events = checkEvents(&rules, p.Events)
	}
	if p.Description != nil {
		checkDescription(&rules, *p.Description)
	}
	if p.Status != nil && *p.Status != store.WebhookEnabled && *p.Status != store.WebhookDisabled {
		rules.add("status", "invalid", `status must be "enabled" or "disabled".`)
	}
	if err := rules.err(apperr.KindUnprocessable); err != nil {
		return WebhookEndpoint{}, err
	}
	now := s.clock()
	var after store.WebhookEndpoint
	err := s.adminTx(ctx, a, func(q store.Queries) error {
		before, err := q.WebhookEndpointByID(ctx, id)
		if err != nil {
			return err
		}
		after = before
		changes := map[string]any{}
		if p.URL != nil && *p.URL != before.URL {
			after.URL = *p.URL
			changes["url"] = map[string]string{"from": before.URL, "to": after.URL}
		}
		if events != nil && !slices.Equal(events, before.Events) {
			after.Events = events
			changes["events"] = map[string][]string{"from": before.Events, "to": after.Events}
		}
		if p.Description != nil && *p.Description != before.Description {
			after.Description = *p.Description
			changes["description"] = map[string]string{"from": before.Description, "to": after.Description}
		}
		if p.Status != nil && *p.Status != before.Status {
			after.Status = *p.Status
			changes["status"] = map[string]string{"from": before.Status, "to": after.Status}
		}
		if len(changes) == 0 {
			return nil
		}
		after.UpdatedAt = now
		if err := q.UpdateWebhookEndpoint(ctx, after); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.webhookEvent(EventWebhookUpdated, now, m, a, map[string]any{"webhook_id": id, "changes": changes}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return WebhookEndpoint{}, errNoSuchWebhook()
	}
	if err != nil {
		return WebhookEndpoint{}, asAppErr(err)
	}
	return after, nil
}

// AdminDeleteWebhook deletes an endpoint with its deliveries, so nothing
// more is sent to it, and audits webhook.deleted.
func (s *Service) AdminDeleteWebhook(ctx context.Context, a Actor, id string, m Meta) error {
	if err := AuthorizeAdmin(a); err != nil {
		return err
	}
	now := s.clock()
	err := s.adminTx(ctx, a, func(q store.Queries) error {
		e, err := q.WebhookEndpointByID(ctx, id)
		if err != nil {
			return err
		}
		if err := q.DeleteWebhookEndpoint(ctx, id); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.webhookEvent(EventWebhookDeleted, now, m, a, map[string]any{"webhook_id": id, "url": e.URL}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return errNoSuchWebhook()
	}
	if err != nil {
		return asAppErr(err)
	}
	return nil
}

// AdminRotateWebhookSecret gives an endpoint a new secret and returns it,
// shown this once. Deliveries keep signing with the secret they sign with
// now until overlap has passed, so a receiver can add the new one first;
// overlap 0 switches at once. A rotation during another's overlap keeps
// the secret still signing (the one receivers know) and replaces the one
// that never signed. The rotation and webhook.secret_rotated commit
// together.
func (s *Service) AdminRotateWebhookSecret(ctx context.Context, a Actor, id string, overlap time.Duration, m Meta) (string, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return "", err
	}
	if overlap < 0 || overlap > MaxSecretOverlap {
		var rules webhookRules
		rules.add("overlap", "invalid", "overlap must be from 0 to "+strconv.Itoa(int(MaxSecretOverlap/time.Second))+" seconds.")
		return "", rules.err(apperr.KindUnprocessable)
	}
	now := s.clock()
	var secret string
	err := s.adminTx(ctx, a, func(q store.Queries) error {
		e, err := q.WebhookEndpointByID(ctx, id)
		if err != nil {
			return err
		}
		if secret, err = newWebhookSecret(s.rand, e.Format); err != nil {
			return err
		}
		sealed, err := s.sealer.Seal([]byte(secret), WebhookSealContext(e.ID))
		if err != nil {
			return err
		}
		signing := e.Secret
		if e.PreviousSecret != nil && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
			signing = e.PreviousSecret
		}
		e.Secret = sealed
		e.PreviousSecret, e.PreviousUntil = nil, nil
		if overlap > 0 {
			until := now.Add(overlap)
			e.PreviousSecret, e.PreviousUntil = signing, &until
		}
		e.UpdatedAt = now
		if err := q.UpdateWebhookEndpoint(ctx, e); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.webhookEvent(EventWebhookSecretRotated, now, m, a, map[string]any{
			"webhook_id": id, "overlap_seconds": int64(overlap / time.Second),
		}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", errNoSuchWebhook()
	}
	if err != nil {
		return "", asAppErr(err)
	}
	return secret, nil
}
