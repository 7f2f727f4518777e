package issuerapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
)

// adminRoutes are the operators' endpoints (API.md section 2). Each needs
// an access token, and the admin role before anything of the request is
// read. The webhook registry's and the signing keys' routes are among them.
func (a *API) adminRoutes() []route {
	return append([]route{
		{pattern: "GET /v1/admin/users", protected: true, handler: a.admin(a.adminUsers)},
		{pattern: "GET /v1/admin/users/{id}", protected: true, handler: a.admin(a.adminUser)},
		{pattern: "PATCH /v1/admin/users/{id}", protected: true, handler: a.admin(a.adminUpdateUser)},
		{pattern: "GET /v1/admin/users/{id}/sessions", protected: true, handler: a.admin(a.adminSessions)},
		{pattern: "DELETE /v1/admin/users/{id}/sessions", protected: true, handler: a.admin(a.adminRevokeSessions)},
		{pattern: "GET /v1/admin/audit", protected: true, handler: a.admin(a.adminAudit)},
	}, append(a.webhookRoutes(), a.keyRoutes()...)...)
}

// adminHandler is a handler of an admin route, given the acting admin.
type adminHandler func(w http.ResponseWriter, r *http.Request, actor auth.Actor)

// admin runs the domain's role check on the caller of h first, so that a
// non-admin learns nothing from validation errors; the service checks again,
// against the database, for reads and writes alike.
func (a *API) admin(h adminHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := identity(r)
		actor := auth.Actor{UserID: id.Subject, Role: id.Role, SessionID: id.SessionID}
		// Accounts, sessions and the audit trail are for nobody's cache.
		w.Header().Set("Cache-Control", "no-store")
		if err := auth.AuthorizeAdmin(actor); err != nil {
			a.writeError(w, r, err)
			return
		}
		h(w, r, actor)
	}
}

// queryLimit reads ?limit=; absent is 0, the service's default.
func queryLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, auth.ErrPageLimit()
	}
	return n, nil
}

// queryPage reads ?limit= and ?cursor=, the page of every admin list.
func queryPage(q url.Values) (auth.PageQuery, error) {
	limit, err := queryLimit(q)
	return auth.PageQuery{Limit: limit, Cursor: q.Get("cursor")}, err
}

// queryTime reads an RFC 3339 time parameter; absent is the zero time.
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		e := errMalformed("The request is not valid.")
		e.Fields = []apperr.FieldError{{Field: name, Code: "invalid", Message: name + " must be an RFC 3339 time, e.g. 2025-01-02T15:04:05Z."}}
		return time.Time{}, e
	}
	return t, nil
}

// listJSON is every admin list: a page of items and the cursor of the next
// page, null on the last.
type listJSON[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func newList[T any](items []T, next string) listJSON[T] {
	l := listJSON[T]{Items: items}
	if l.Items == nil {
		l.Items = []T{}
	}
	if next != "" {
		l.NextCursor = &next
	}
	return l
}

// listOf is the list of items as view shows each.
func listOf[T, V any](items []T, view func(T) V, next string) listJSON[V] {
	return newList(views(items, view), next)
}

// views is each of items as view shows it; never nil.
func views[T, V any](items []T, view func(T) V) []V {
	vs := make([]V, len(items))
	for i, x := range items {
		vs[i] = view(x)
	}
	return vs
}

func (a *API) adminUsers(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	q := r.URL.Query()
	pq, err := queryPage(q)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, err := a.auth.AdminUsers(r.Context(), actor, auth.UserQuery{Email: q.Get("email"), Limit: pq.Limit, Cursor: pq.Cursor})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, listOf(page.Users, userView, page.Next))
}

func (a *API) adminUser(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	u, err := a.auth.AdminUser(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, userView(u))
}

// patchUserRequest: an absent or null field stays as it is.
type patchUserRequest struct {
	Status         *string `json:"status"`
	Role           *string `json:"role"`
	TenantID       *string `json:"tenant_id"`
	OrganizationID *string `json:"organization_id"`
}

func (a *API) adminUpdateUser(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	var req patchUserRequest
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	u, err := a.auth.AdminUpdateUser(r.Context(), actor, r.PathValue("id"), auth.UserPatch{
		Status: req.Status, Role: req.Role, TenantID: req.TenantID, OrganizationID: req.OrganizationID,
	}, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, userView(u))
}

func (a *API) adminSessions(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	pq, err := queryPage(r.URL.Query())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, err := a.auth.AdminSessions(r.Context(), actor, r.PathValue("id"), pq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, listOf(page.Sessions, sessionView, page.Next))
}

func (a *API) adminRevokeSessions(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	if _, err := a.auth.AdminRevokeSessions(r.Context(), actor, r.PathValue("id"), a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) adminAudit(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	q := r.URL.Query()
	pq, err := queryPage(q)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	since, err := queryTime(q, "since")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	until, err := queryTime(q, "until")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, err := a.auth.AdminAudit(r.Context(), actor, auth.AuditQuery{
		UserID: q.Get("user_id"), Type: q.Get("type"), Since: since, Until: until, Limit: pq.Limit, Cursor: pq.Cursor,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, listOf(page.Events, auditView, page.Next))
}

// auditJSON is an audit entry (API.md section 5), with actor_id when an
// admin acted on the user.
type auditJSON struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	OccurredAt string          `json:"occurred_at"`
	UserID     string          `json:"user_id,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
	ActorID    string          `json:"actor_id,omitempty"`
	IP         string          `json:"ip,omitempty"`
	UserAgent  string          `json:"user_agent,omitempty"`
	RequestID  string          `json:"request_id,omitempty"`
	Data       json.RawMessage `json:"data"`
}

func auditView(e auth.AuditEvent) auditJSON {
	data := json.RawMessage(e.Data)
	if !json.Valid(data) {
		data = json.RawMessage("{}")
	}
	return auditJSON{
		// Sub-second precision: entries of one second keep their order for
		// a reader too.
		ID: e.ID, Type: e.Type, OccurredAt: e.OccurredAt.UTC().Format(time.RFC3339Nano),
		UserID: e.UserID, SessionID: e.SessionID, ActorID: e.ActorID,
		IP: e.IP, UserAgent: e.UserAgent, RequestID: e.RequestID, Data: data,
	}
}

// UserObject is the API's user object of u, for the command line's JSON
// output: the CLI prints what the API answers.
func UserObject(u auth.Account) any { return userView(u) }

// AuditObject is the API's audit entry of e, for the command line.
func AuditObject(e auth.AuditEvent) any { return auditView(e) }
