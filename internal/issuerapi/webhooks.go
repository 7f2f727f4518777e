package issuerapi

import (
	"net/http"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
)

// webhookRoutes are the admin endpoints of outbound webhooks (API.md
// section 5).
func (a *API) webhookRoutes() []route {
	return []route{
		{pattern: "POST /v1/admin/webhooks", protected: true, handler: a.admin(a.createWebhook)},
		{pattern: "GET /v1/admin/webhooks", protected: true, handler: a.admin(a.listWebhooks)},
		{pattern: "GET /v1/admin/webhooks/{id}", protected: true, handler: a.admin(a.webhook)},
		{pattern: "PATCH /v1/admin/webhooks/{id}", protected: true, handler: a.admin(a.updateWebhook)},
		{pattern: "DELETE /v1/admin/webhooks/{id}", protected: true, handler: a.admin(a.deleteWebhook)},
		{pattern: "POST /v1/admin/webhooks/{id}/secret", protected: true, handler: a.admin(a.rotateWebhookSecret)},
		{pattern: "GET /v1/admin/webhooks/{id}/deliveries", protected: true, handler: a.admin(a.webhookDeliveries)},
		{pattern: "POST /v1/admin/webhooks/deliveries/{id}/retry", protected: true, handler: a.admin(a.redeliver)},
	}
}

// webhookJSON is the endpoint object; Secret only in the answer to its
// registration.
type webhookJSON struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
	Format      string   `json:"format"`
	Status      string   `json:"status"`
	CreatedAt   string   `json:"created_at"`
	Secret      string   `json:"secret,omitempty"`
}

// webhookView is the only way an endpoint leaves the service: never its
// sealed secrets.
func webhookView(e auth.WebhookEndpoint) webhookJSON {
	events := e.Events
	if events == nil {
		events = []string{}
	}
	return webhookJSON{
		ID: e.ID, URL: e.URL, Events: events, Description: e.Description, Format: e.Format,
		Status: e.Status, CreatedAt: rfc3339(e.CreatedAt),
	}
}

// deliveryJSON is the delivery object.
type deliveryJSON struct {
	ID             string  `json:"id"`
	EndpointID     string  `json:"endpoint_id"`
	EventID        string  `json:"event_id"`
	EventType      string  `json:"event_type"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	LastAttemptAt  *string `json:"last_attempt_at,omitempty"`
	LastStatusCode *int    `json:"last_status_code,omitempty"`
	LastError      string  `json:"last_error,omitempty"`
	NextAttemptAt  *string `json:"next_attempt_at,omitempty"`
	CreatedAt      string  `json:"created_at"`
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

func deliveryView(d auth.WebhookDelivery) deliveryJSON {
	v := deliveryJSON{
		ID: d.ID, EndpointID: d.EndpointID, EventID: d.EventID, EventType: d.EventType, Status: d.Status,
		Attempts: d.Attempts, LastAttemptAt: optTime(d.LastAttemptAt), LastError: d.LastError,
		CreatedAt: rfc3339(d.CreatedAt),
	}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		v.LastStatusCode = &code
	}
	if d.Status == auth.DeliveryPending {
		v.NextAttemptAt = optTime(d.NextAttemptAt)
	}
	return v
}

// WebhookObject is the API's endpoint object of e, for the command line.
func WebhookObject(e auth.WebhookEndpoint) any { return webhookView(e) }

// DeliveryObject is the API's delivery object of d, for the command line.
func DeliveryObject(d auth.WebhookDelivery) any { return deliveryView(d) }

// createWebhookRequest is the registration; an absent format is "seed".
type createWebhookRequest struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Format      string   `json:"format"`
}

func (a *API) createWebhook(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	var req createWebhookRequest
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	created, err := a.auth.AdminCreateWebhook(r.Context(), actor, auth.WebhookInput{
		URL: req.URL, Events: req.Events, Description: req.Description, Format: req.Format,
	}, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	v := webhookView(created.Endpoint)
	v.Secret = created.Secret
	noStore(w)
	w.Header().Set("Location", "/v1/admin/webhooks/"+created.Endpoint.ID)
	a.writeJSON(w, r, http.StatusCreated, v)
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	pq, err := queryPage(r.URL.Query())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, err := a.auth.AdminWebhooks(r.Context(), actor, pq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, listOf(page.Endpoints, webhookView, page.Next))
}

func (a *API) webhook(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	e, err := a.auth.AdminWebhook(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, webhookView(e))
}

// patchWebhookRequest: an absent or null field stays as it is.
type patchWebhookRequest struct {
	URL         *string   `json:"url"`
	Events      *[]string `json:"events"`
	Description *string   `json:"description"`
	Status      *string   `json:"status"`
}

func (a *API) updateWebhook(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	var req patchWebhookRequest
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	p := auth.WebhookPatch{URL: req.URL, Description: req.Description, Status: req.Status}
	if req.Events != nil {
		// An empty list is a change (refused as such), not "unchanged".
		p.Events = append([]string{}, *req.Events...)
	}
	e, err := a.auth.AdminUpdateWebhook(r.Context(), actor, r.PathValue("id"), p, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, webhookView(e))
}

func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	if err := a.auth.AdminDeleteWebhook(r.Context(), actor, r.PathValue("id"), a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rotateSecretRequest: overlap in seconds; absent is a day.
type rotateSecretRequest struct {
	Overlap *int64 `json:"overlap"`
}

// maxOverlapSeconds keeps the conversion to a duration from overflowing;
// the service applies the real bound.
const maxOverlapSeconds = 1 << 32

func (a *API) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	var req rotateSecretRequest
	// A rotation without options may come without a body.
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		if err := a.decode(w, r, &req); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	overlap := auth.DefaultSecretOverlap
	if req.Overlap != nil {
		s := min(max(*req.Overlap, -1), maxOverlapSeconds)
		overlap = time.Duration(s) * time.Second
	}
	secret, err := a.auth.AdminRotateWebhookSecret(r.Context(), actor, r.PathValue("id"), overlap, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	noStore(w)
	a.writeJSON(w, r, http.StatusOK, map[string]string{"secret": secret})
}

func (a *API) webhookDeliveries(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	q := r.URL.Query()
	pq, err := queryPage(q)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, err := a.auth.AdminWebhookDeliveries(r.Context(), actor, r.PathValue("id"), auth.DeliveryQuery{
		Status: q.Get("status"), Limit: pq.Limit, Cursor: pq.Cursor,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, listOf(page.Deliveries, deliveryView, page.Next))
}

func (a *API) redeliver(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	if err := a.auth.AdminRedeliver(r.Context(), actor, r.PathValue("id"), a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
