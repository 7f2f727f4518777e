package issuerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/pkg/verify"
)

func TestWebhookView(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	until := at.Add(time.Hour)
	for _, tc := range []struct {
		name string
		e    auth.WebhookEndpoint
		want string
	}{
		{"Bare", auth.WebhookEndpoint{ID: "w1", URL: "https://h.example/x", Events: []string{"*"}, Format: "seed", Status: "enabled", CreatedAt: at},
			`{"id":"w1","url":"https://h.example/x","events":["*"],"format":"seed","status":"enabled","created_at":"2026-01-02T03:04:05Z"}`},
		{"SecretsNeverShown", auth.WebhookEndpoint{ID: "w2", URL: "https://h.example/y", Events: []string{"user.registered", "user.logged_in"},
			Description: "crm", Format: "standard-webhooks", Status: "disabled", Secret: []byte("sealed-now"),
			PreviousSecret: []byte("sealed-before"), PreviousUntil: &until, CreatedAt: at, UpdatedAt: until},
			`{"id":"w2","url":"https://h.example/y","events":["user.registered","user.logged_in"],"description":"crm","format":"standard-webhooks","status":"disabled","created_at":"2026-01-02T03:04:05Z"}`},
		{"NoEvents", auth.WebhookEndpoint{ID: "w3", URL: "https://h.example/z", Format: "seed", Status: "enabled", CreatedAt: at},
			`{"id":"w3","url":"https://h.example/z","events":[],"format":"seed","status":"enabled","created_at":"2026-01-02T03:04:05Z"}`},
	} {
		got, err := json.Marshal(webhookView(tc.e))
		if err != nil || string(got) != tc.want {
			t.Errorf("webhookView(%s) = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

func TestDeliveryView(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	next := at.Add(time.Minute)
	for _, tc := range []struct {
		name string
		d    auth.WebhookDelivery
		want string
	}{
		{"New", auth.WebhookDelivery{ID: "d1", EndpointID: "w", EventID: "e", EventType: "user.registered", Status: "pending", NextAttemptAt: &at, CreatedAt: at},
			`{"id":"d1","endpoint_id":"w","event_id":"e","event_type":"user.registered","status":"pending","attempts":0,"next_attempt_at":"2026-01-02T03:04:05Z","created_at":"2026-01-02T03:04:05Z"}`},
		{"Retrying", auth.WebhookDelivery{ID: "d2", EndpointID: "w", EventID: "e", EventType: "user.logged_in", Status: "pending", Attempts: 2,
			NextAttemptAt: &next, LastAttemptAt: &at, LastStatusCode: 500, LastError: "HTTP 500", LeaseUntil: &next, CreatedAt: at},
			`{"id":"d2","endpoint_id":"w","event_id":"e","event_type":"user.logged_in","status":"pending","attempts":2,"last_attempt_at":"2026-01-02T03:04:05Z","last_status_code":500,"last_error":"HTTP 500","next_attempt_at":"2026-01-02T03:05:05Z","created_at":"2026-01-02T03:04:05Z"}`},
		{"FailedWithoutAnswer", auth.WebhookDelivery{ID: "d3", EndpointID: "w", EventID: "e", EventType: "login.failed", Status: "failed", Attempts: 12,
			NextAttemptAt: &next, LastAttemptAt: &at, LastError: "timeout", CreatedAt: at},
			`{"id":"d3","endpoint_id":"w","event_id":"e","event_type":"login.failed","status":"failed","attempts":12,"last_attempt_at":"2026-01-02T03:04:05Z","last_error":"timeout","created_at":"2026-01-02T03:04:05Z"}`},
	} {
		got, err := json.Marshal(deliveryView(tc.d))
		if err != nil || string(got) != tc.want {
			t.Errorf("deliveryView(%s) = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

// TestWebhookRoutesAreAdmin: every webhook route needs the access token and
// refuses a non-admin before it reads the request.
func TestWebhookRoutesAreAdmin(t *testing.T) {
	a := &API{}
	for _, rt := range a.webhookRoutes() {
		t.Run(rt.pattern, func(t *testing.T) {
			if !rt.protected {
				t.Fatalf("%s is not protected", rt.pattern)
			}
			method, path, _ := strings.Cut(rt.pattern, " ")
			path = strings.NewReplacer("{id}", "x").Replace(path)
			r := httptest.NewRequest(method, path, strings.NewReader("not json"))
			r = r.WithContext(verify.NewContext(r.Context(), &verify.Identity{Subject: "u1", Role: "user"}))
			w := httptest.NewRecorder()
			rt.handler(w, r)
			if w.Code != http.StatusForbidden {
				t.Fatalf("%s as a user: status = %d, want 403; body %s", rt.pattern, w.Code, w.Body)
			}
		})
	}
}

// FuzzDecodeWebhookRequests: no body panics the decoding of a webhook
// request, and every refusal is a malformed_request (400).
func FuzzDecodeWebhookRequests(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://h.example/x","events":["*"]}`, `{"url":1}`, `{"events":"user.registered"}`, `{"events":[1]}`,
		`{"events":null,"status":null}`, `{"overlap":-1}`, `{"overlap":1e40}`, `{"overlap":"1h"}`, `{"description":"\u0000"}`,
		`{"events":["\u0000"]}`, `[]`, `{`, `{}{}`, "{\"url\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&createWebhookRequest{}, &patchWebhookRequest{}, &rotateSecretRequest{}} {
			err := decodeJSON(body, dst)
			if err == nil {
				if out, _ := json.Marshal(dst); bytes.Contains(out, []byte(`\u0000`)) {
					t.Fatalf("decodeJSON(%q) accepted a NUL: %s", body, out)
				}
				continue
			}
			var e *apperr.Error
			if !errors.As(err, &e) || statusOf[e.Kind] != http.StatusBadRequest || e.Code != "malformed_request" {
				t.Fatalf("decodeJSON(%q) = %v, want a 400 malformed_request", body, err)
			}
		}
	})
}
