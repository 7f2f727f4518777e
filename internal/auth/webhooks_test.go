package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/netguard"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/pkg/webhook"
)

// hookURL is inside the test guard's allow-list, so no name is resolved.
const hookURL = "https://198.51.100.7/hook"

// webhookFixture is the fixture's service with the webhook collaborators:
// a guard that admits 198.51.100.0/24, and a counter of dispatcher wake-ups.
type webhookFixture struct {
	*fixture
	svc   *auth.Service
	woken *atomic.Int32
}

func newWebhookFixture(t *testing.T, dbURL string) webhookFixture {
	t.Helper()
	f := newFixture(t, dbURL, 0)
	var woken atomic.Int32
	d := f.deps
	d.WebhookURLs = netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
	d.WebhookQueued = func() { woken.Add(1) }
	return webhookFixture{fixture: f, svc: auth.New(d, f.cfg), woken: &woken}
}

// webhookAudit returns the audit entries of typ, newest first.
func (f webhookFixture) webhookAudit(t *testing.T, typ string) []store.AuditEvent {
	t.Helper()
	es, err := f.st.ListAudit(context.Background(), store.AuditFilter{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func (f webhookFixture) open(t *testing.T, sealed []byte, id string) string {
	t.Helper()
	plain, err := f.sealer.Open(sealed, auth.WebhookSealContext(id))
	if err != nil {
		t.Fatalf("open the secret of %s: %v", id, err)
	}
	return string(plain)
}

func TestWebhookCreate(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-admin@example.com")
		for _, tc := range []struct {
			format, wantFormat string
			decode             func(string) ([]byte, error)
		}{
			{"", "seed", base64.RawURLEncoding.DecodeString},
			{"seed", "seed", base64.RawURLEncoding.DecodeString},
			{"standard-webhooks", "standard-webhooks", webhook.ParseStandardSecret},
		} {
			got, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{
				URL: hookURL, Events: []string{"user.registered", "user.logged_in", "user.registered"}, Description: "crm", Format: tc.format,
			}, auth.Meta{RequestID: "r1"})
			if err != nil {
				t.Fatalf("AdminCreateWebhook(format %q) = %v", tc.format, err)
			}
			e := got.Endpoint
			if e.Format != tc.wantFormat || e.Status != auth.WebhookEnabled || !slices.Equal(e.Events, []string{"user.registered", "user.logged_in"}) {
				t.Errorf("AdminCreateWebhook(format %q) = %+v, want format %s, enabled, events without the duplicate", tc.format, e, tc.wantFormat)
			}
			key, err := tc.decode(got.Secret)
			if err != nil || len(key) != 32 {
				t.Errorf("secret %q of format %q: %d bytes, %v; want 256 random bits", got.Secret, tc.format, len(key), err)
			}
			stored, err := f.st.WebhookEndpointByID(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(stored.Secret), got.Secret) {
				t.Errorf("the store holds the secret in clear")
			}
			if plain := f.open(t, stored.Secret, e.ID); plain != got.Secret {
				t.Errorf("sealed secret opens to %q, want the secret shown %q", plain, got.Secret)
			}
			if _, err := f.sealer.Open(stored.Secret, auth.WebhookSealContext("another endpoint")); err == nil {
				t.Errorf("the sealed secret opens under another endpoint's context")
			}
			if stored.PreviousSecret != nil || stored.PreviousUntil != nil {
				t.Errorf("a new endpoint has a previous secret: %+v", stored)
			}
		}
		created := f.webhookAudit(t, auth.EventWebhookCreated)
		if len(created) != 3 {
			t.Fatalf("%d webhook.created entries, want 3", len(created))
		}
		d := dataOf(t, created[0])
		if created[0].ActorID != admin.UserID || d["via"] != "api" || d["url"] != hookURL || d["webhook_id"] == nil || created[0].RequestID != "r1" {
			t.Errorf("webhook.created = %+v, data %v; want the admin, via api, the url and the id", created[0], d)
		}
		if strings.Contains(strings.ToLower(string(created[0].Data)), "secret") {
			t.Errorf("webhook.created data %s mentions a secret", created[0].Data)
		}
	})
}

func wantFieldError(t *testing.T, what string, err error, kind apperr.Kind, field string) {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != "validation_failed" || e.Kind != kind {
		t.Fatalf("%s: err = %v, want validation_failed of kind %d", what, err, kind)
	}
	for _, fe := range e.Fields {
		if fe.Field == field {
			return
		}
	}
	t.Errorf("%s: fields = %+v, want one for %q", what, e.Fields, field)
}

func TestWebhookCreateRefuses(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-refuse@example.com")
		all := []string{"*"}
		for _, tc := range []struct {
			name  string
			in    auth.WebhookInput
			field string
		}{
			{"NoURL", auth.WebhookInput{Events: all}, "url"},
			{"HTTPLoopback", auth.WebhookInput{URL: "http://127.0.0.1:8080/hook", Events: all}, "url"},
			{"HTTPSLoopback", auth.WebhookInput{URL: "https://127.0.0.1/hook", Events: all}, "url"},
			{"Private", auth.WebhookInput{URL: "https://10.0.0.1/hook", Events: all}, "url"},
			{"IPv6Loopback", auth.WebhookInput{URL: "https://[::1]/hook", Events: all}, "url"},
			{"HexLoopback", auth.WebhookInput{URL: "https://0x7f000001/hook", Events: all}, "url"},
			{"Metadata", auth.WebhookInput{URL: "https://169.254.169.254/latest", Events: all}, "url"},
			{"UserInfo", auth.WebhookInput{URL: "https://user:pw@example.com/hook", Events: all}, "url"},
			{"Localhost", auth.WebhookInput{URL: "https://localhost/hook", Events: all}, "url"},
			{"NotHTTP", auth.WebhookInput{URL: "ftp://198.51.100.7/x", Events: all}, "url"},
			{"Relative", auth.WebhookInput{URL: "/hook", Events: all}, "url"},
			{"TooLong", auth.WebhookInput{URL: hookURL + "/" + strings.Repeat("a", 2048), Events: all}, "url"},
			{"NoEvents", auth.WebhookInput{URL: hookURL}, "events"},
			{"UnknownEvent", auth.WebhookInput{URL: hookURL, Events: []string{"user.updated"}}, "events"},
			{"StarAndMore", auth.WebhookInput{URL: hookURL, Events: []string{"*", "user.registered"}}, "events"},
			{"AuditOnlyType", auth.WebhookInput{URL: hookURL, Events: []string{auth.EventWebhookCreated}}, "events"},
			{"LongDescription", auth.WebhookInput{URL: hookURL, Events: all, Description: strings.Repeat("d", 501)}, "description"},
			{"ControlInDescription", auth.WebhookInput{URL: hookURL, Events: all, Description: "a\nb"}, "description"},
			{"Format", auth.WebhookInput{URL: hookURL, Events: all, Format: "svix"}, "format"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.svc.AdminCreateWebhook(ctx, admin, tc.in, auth.Meta{})
				wantFieldError(t, "AdminCreateWebhook("+tc.name+")", err, apperr.KindInvalid, tc.field)
			})
		}
		page, err := f.svc.AdminWebhooks(ctx, admin, auth.PageQuery{})
		if err != nil || len(page.Endpoints) != 0 {
			t.Errorf("AdminWebhooks after refusals = %d endpoints, %v; want none", len(page.Endpoints), err)
		}
	})
}

func TestWebhookAuthorization(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-authz@example.com")
		created, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"*"}}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		user := f.user(t, "hooks-user@example.com")
		demoted := f.admin(t, "hooks-demoted@example.com")
		if _, err := f.svc.AdminUpdateUser(ctx, admin, demoted.UserID, auth.UserPatch{Role: ptr("user")}, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		calls := map[string]func(a auth.Actor) error{
			"Create": func(a auth.Actor) error {
				_, err := f.svc.AdminCreateWebhook(ctx, a, auth.WebhookInput{URL: hookURL, Events: []string{"*"}}, auth.Meta{})
				return err
			},
			"List": func(a auth.Actor) error { _, err := f.svc.AdminWebhooks(ctx, a, auth.PageQuery{}); return err },
			"Get":  func(a auth.Actor) error { _, err := f.svc.AdminWebhook(ctx, a, id); return err },
			"Update": func(a auth.Actor) error {
				_, err := f.svc.AdminUpdateWebhook(ctx, a, id, auth.WebhookPatch{}, auth.Meta{})
				return err
			},
			"Rotate": func(a auth.Actor) error {
				_, err := f.svc.AdminRotateWebhookSecret(ctx, a, id, 0, auth.Meta{})
				return err
			},
			"Deliveries": func(a auth.Actor) error {
				_, err := f.svc.AdminWebhookDeliveries(ctx, a, id, auth.DeliveryQuery{})
				return err
			},
			"Redeliver": func(a auth.Actor) error { return f.svc.AdminRedeliver(ctx, a, "nope", auth.Meta{}) },
			"Delete":    func(a auth.Actor) error { return f.svc.AdminDeleteWebhook(ctx, a, id, auth.Meta{}) },
		}
		for name, call := range calls {
			for _, who := range []struct {
				name string
				a    auth.Actor
			}{
				{"User", auth.Actor{UserID: user.ID, Role: user.Role}},
				{"ClaimsAdmin", auth.Actor{UserID: user.ID, Role: auth.RoleAdmin}}, // a token minted before a demotion
				{"Demoted", demoted},
			} {
				if err := call(who.a); !apperr.Is(err, "forbidden") {
					t.Errorf("%s as %s = %v, want forbidden", name, who.name, err)
				}
			}
		}
		if _, err := f.svc.AdminWebhook(ctx, admin, id); err != nil {
			t.Errorf("the endpoint after refused calls: %v, want it intact", err)
		}
	})
}

func TestWebhookListPages(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-pages@example.com")
		var want []string
		for range 5 {
			c, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"*"}}, auth.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, c.Endpoint.ID)
		}
		var got []string
		q := auth.PageQuery{Limit: 2}
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("the pages never end")
			}
			page, err := f.svc.AdminWebhooks(ctx, admin, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Endpoints {
				got = append(got, e.ID)
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		if !slices.Equal(got, want) {
			t.Errorf("AdminWebhooks pages = %v, want %v (oldest first, each once)", got, want)
		}
		for _, bad := range []auth.PageQuery{{Limit: -1}, {Limit: 501}, {Cursor: "nope"}} {
			if _, err := f.svc.AdminWebhooks(ctx, admin, bad); !apperr.Is(err, "malformed_request") {
				t.Errorf("AdminWebhooks(%+v) = %v, want malformed_request", bad, err)
			}
		}
		// A cursor of another list is refused.
		f.user(t, "hooks-pages-user@example.com")
		users, err := f.svc.AdminUsers(ctx, admin, auth.UserQuery{Limit: 1})
		if err != nil || users.Next == "" {
			t.Fatalf("AdminUsers: %v, next %q", err, users.Next)
		}
		if _, err := f.svc.AdminWebhooks(ctx, admin, auth.PageQuery{Cursor: users.Next}); !apperr.Is(err, "malformed_request") {
			t.Errorf("AdminWebhooks(users cursor) = %v, want malformed_request", err)
		}
	})
}

func TestWebhookUpdateAndDelete(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-update@example.com")
		c, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"*"}}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		id := c.Endpoint.ID
		newURL := "https://198.51.100.8/other"
		got, err := f.svc.AdminUpdateWebhook(ctx, admin, id, auth.WebhookPatch{
			URL: &newURL, Events: []string{"user.registered"}, Description: ptr("billing"), Status: ptr(auth.WebhookDisabled),
		}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if got.URL != newURL || !slices.Equal(got.Events, []string{"user.registered"}) || got.Description != "billing" || got.Status != auth.WebhookDisabled {
			t.Errorf("AdminUpdateWebhook = %+v, want every member changed", got)
		}
		read, err := f.svc.AdminWebhook(ctx, admin, id)
		if err != nil || read.URL != newURL || read.Status != auth.WebhookDisabled || !slices.Equal(read.Secret, got.Secret) {
			t.Errorf("AdminWebhook after the change = %+v, %v; want it as changed, secret kept", read, err)
		}
		updated := f.webhookAudit(t, auth.EventWebhookUpdated)
		if len(updated) != 1 {
			t.Fatalf("%d webhook.updated entries, want 1", len(updated))
		}
		changes, _ := dataOf(t, updated[0])["changes"].(map[string]any)
		for _, k := range []string{"url", "events", "description", "status"} {
			if changes[k] == nil {
				t.Errorf("webhook.updated changes = %v, want %s", changes, k)
			}
		}
		// The same values again: nothing changes, nothing is recorded.
		if _, err := f.svc.AdminUpdateWebhook(ctx, admin, id, auth.WebhookPatch{Status: ptr(auth.WebhookDisabled)}, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		if n := len(f.webhookAudit(t, auth.EventWebhookUpdated)); n != 1 {
			t.Errorf("%d webhook.updated entries after a no-op, want 1", n)
		}

		for _, tc := range []struct {
			name  string
			p     auth.WebhookPatch
			field string
		}{
			{"Status", auth.WebhookPatch{Status: ptr("paused")}, "status"},
			{"URL", auth.WebhookPatch{URL: ptr("https://10.1.2.3/x")}, "url"},
			{"EmptyEvents", auth.WebhookPatch{Events: []string{}}, "events"},
			{"Description", auth.WebhookPatch{Description: ptr(strings.Repeat("x", 501))}, "description"},
		} {
			_, err := f.svc.AdminUpdateWebhook(ctx, admin, id, tc.p, auth.Meta{})
			wantFieldError(t, "AdminUpdateWebhook("+tc.name+")", err, apperr.KindUnprocessable, tc.field)
		}
		if _, err := f.svc.AdminUpdateWebhook(ctx, admin, "nope", auth.WebhookPatch{Status: ptr(auth.WebhookEnabled)}, auth.Meta{}); !apperr.Is(err, "not_found") {
			t.Errorf("AdminUpdateWebhook(unknown) = %v, want not_found", err)
		}

		if err := f.svc.AdminDeleteWebhook(ctx, auth.Operator(), id, auth.Meta{UserAgent: "issuer-cli"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.AdminWebhook(ctx, admin, id); !apperr.Is(err, "not_found") {
			t.Errorf("AdminWebhook after delete = %v, want not_found", err)
		}
		if err := f.svc.AdminDeleteWebhook(ctx, admin, id, auth.Meta{}); !apperr.Is(err, "not_found") {
			t.Errorf("AdminDeleteWebhook again = %v, want not_found", err)
		}
		deleted := f.webhookAudit(t, auth.EventWebhookDeleted)
		if len(deleted) != 1 || deleted[0].ActorID != "" || dataOf(t, deleted[0])["via"] != "cli" {
			t.Errorf("webhook.deleted = %+v, want one entry by the operator, via cli", deleted)
		}
	})
}

func TestWebhookRotateSecret(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-rotate@example.com")
		c, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"*"}, Format: "standard-webhooks"}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		id, first := c.Endpoint.ID, c.Secret

		second, err := f.svc.AdminRotateWebhookSecret(ctx, admin, id, time.Hour, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if second == first || !strings.HasPrefix(second, webhook.StandardSecretPrefix) {
			t.Fatalf("rotated secret %q: want a new whsec_ secret", second)
		}
		e, err := f.st.WebhookEndpointByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if f.open(t, e.Secret, id) != second || e.PreviousSecret == nil || f.open(t, e.PreviousSecret, id) != first ||
			e.PreviousUntil == nil || !e.PreviousUntil.Equal(f.clock.Now().UTC().Add(time.Hour)) {
			t.Errorf("after a rotation with 1h overlap: %+v; want the new secret, the first one previous until now+1h", e)
		}

		// Within the overlap: the secret still signing (the first) stays
		// previous; the second, which never signed, is dropped.
		f.clock.Advance(10 * time.Minute)
		third, err := f.svc.AdminRotateWebhookSecret(ctx, admin, id, 2*time.Hour, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ = f.st.WebhookEndpointByID(ctx, id)
		if f.open(t, e.Secret, id) != third || f.open(t, e.PreviousSecret, id) != first || !e.PreviousUntil.Equal(f.clock.Now().UTC().Add(2*time.Hour)) {
			t.Errorf("a rotation within the overlap: previous = %q, want the first secret, still signing", f.open(t, e.PreviousSecret, id))
		}

		// After the overlap, the current secret becomes previous.
		f.clock.Advance(3 * time.Hour)
		fourth, err := f.svc.AdminRotateWebhookSecret(ctx, admin, id, time.Minute, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ = f.st.WebhookEndpointByID(ctx, id)
		if f.open(t, e.Secret, id) != fourth || f.open(t, e.PreviousSecret, id) != third {
			t.Errorf("a rotation after the overlap: previous = %q, want the third secret", f.open(t, e.PreviousSecret, id))
		}

		// Overlap 0 switches at once.
		fifth, err := f.svc.AdminRotateWebhookSecret(ctx, admin, id, 0, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ = f.st.WebhookEndpointByID(ctx, id)
		if f.open(t, e.Secret, id) != fifth || e.PreviousSecret != nil || e.PreviousUntil != nil {
			t.Errorf("a rotation without overlap: %+v, want no previous secret", e)
		}

		for _, bad := range []time.Duration{-time.Second, auth.MaxSecretOverlap + time.Second} {
			_, err := f.svc.AdminRotateWebhookSecret(ctx, admin, id, bad, auth.Meta{})
			wantFieldError(t, "AdminRotateWebhookSecret(overlap "+bad.String()+")", err, apperr.KindUnprocessable, "overlap")
		}
		if _, err := f.svc.AdminRotateWebhookSecret(ctx, admin, "nope", 0, auth.Meta{}); !apperr.Is(err, "not_found") {
			t.Errorf("AdminRotateWebhookSecret(unknown) = %v, want not_found", err)
		}
		rotated := f.webhookAudit(t, auth.EventWebhookSecretRotated)
		if len(rotated) != 4 || dataOf(t, rotated[0])["overlap_seconds"] != float64(0) {
			t.Errorf("webhook.secret_rotated entries = %d, newest data %s; want 4, overlap 0", len(rotated), rotated[0].Data)
		}
		for _, r := range rotated {
			for _, s := range []string{first, second, third, fourth, fifth} {
				if strings.Contains(string(r.Data), s) {
					t.Errorf("webhook.secret_rotated data %s holds a secret", r.Data)
				}
			}
		}
	})
}

func TestWebhookDeliveriesAndRedeliver(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newWebhookFixture(t, dbURL)
		admin := f.admin(t, "hooks-deliveries@example.com")
		c, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"user.registered"}}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		other, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"password.reset"}}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		id := c.Endpoint.ID
		for _, email := range []string{"d1@example.com", "d2@example.com", "d3@example.com"} {
			f.user(t, email)
		}
		var all []auth.WebhookDelivery
		q := auth.DeliveryQuery{Limit: 2}
		for {
			page, err := f.svc.AdminWebhookDeliveries(ctx, admin, id, q)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Deliveries...)
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		if len(all) != 3 {
			t.Fatalf("AdminWebhookDeliveries = %d deliveries, want 3 (one per registration)", len(all))
		}
		for i, d := range all {
			if d.EndpointID != id || d.EventType != "user.registered" || d.Status != auth.DeliveryPending {
				t.Errorf("delivery %d = %+v, want a pending user.registered of the endpoint", i, d)
			}
			if i > 0 && d.CreatedAt.After(all[i-1].CreatedAt) {
				t.Errorf("deliveries not newest first: %v after %v", d.CreatedAt, all[i-1].CreatedAt)
			}
		}
		if page, err := f.svc.AdminWebhookDeliveries(ctx, admin, other.Endpoint.ID, auth.DeliveryQuery{}); err != nil || len(page.Deliveries) != 0 {
			t.Errorf("deliveries of the endpoint subscribed to password.reset = %d, %v; want none", len(page.Deliveries), err)
		}
		for _, status := range []string{auth.DeliveryDelivered, auth.DeliveryFailed} {
			page, err := f.svc.AdminWebhookDeliveries(ctx, admin, id, auth.DeliveryQuery{Status: status})
			if err != nil || len(page.Deliveries) != 0 {
				t.Errorf("AdminWebhookDeliveries(status %s) = %d, %v; want none", status, len(page.Deliveries), err)
			}
		}
		if _, err := f.svc.AdminWebhookDeliveries(ctx, admin, id, auth.DeliveryQuery{Status: "sent"}); !apperr.Is(err, "malformed_request") {
			t.Errorf("AdminWebhookDeliveries(status sent) = %v, want malformed_request", err)
		}
		if _, err := f.svc.AdminWebhookDeliveries(ctx, admin, "nope", auth.DeliveryQuery{}); !apperr.Is(err, "not_found") {
			t.Errorf("AdminWebhookDeliveries(unknown endpoint) = %v, want not_found", err)
		}

		f.clock.Advance(time.Minute)
		target := all[1]
		if err := f.svc.AdminRedeliver(ctx, admin, target.ID, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		if f.woken.Load() != 1 {
			t.Errorf("dispatcher woken %d times after a redelivery, want 1", f.woken.Load())
		}
		d, err := f.st.WebhookDeliveryByID(ctx, target.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != auth.DeliveryPending || d.EventID != target.EventID || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(f.clock.Now().UTC()) {
			t.Errorf("redelivered = %+v, want pending, due now, the same event", d)
		}
		red := f.webhookAudit(t, auth.EventWebhookRedelivered)
		if len(red) != 1 || red[0].ActorID != admin.UserID || dataOf(t, red[0])["event_id"] != target.EventID || dataOf(t, red[0])["delivery_id"] != target.ID {
			t.Errorf("webhook.redelivered = %+v, want one by the admin naming the delivery and event", red)
		}
		if err := f.svc.AdminRedeliver(ctx, admin, "nope", auth.Meta{}); !apperr.Is(err, "not_found") {
			t.Errorf("AdminRedeliver(unknown) = %v, want not_found", err)
		}
		if f.woken.Load() != 1 {
			t.Errorf("dispatcher woken %d times after a refused redelivery, want still 1", f.woken.Load())
		}

		// Audit-only types are never delivered: the admin actions above
		// queued nothing for an endpoint subscribed to everything.
		star, err := f.svc.AdminCreateWebhook(ctx, admin, auth.WebhookInput{URL: hookURL, Events: []string{"*"}}, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.AdminRotateWebhookSecret(ctx, admin, star.Endpoint.ID, 0, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		if page, err := f.svc.AdminWebhookDeliveries(ctx, admin, star.Endpoint.ID, auth.DeliveryQuery{}); err != nil || len(page.Deliveries) != 0 {
			t.Errorf("deliveries of webhook.* audit entries = %+v, %v; want none", page.Deliveries, err)
		}
	})
}
