package webhook_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/webhook"
)

func TestBody(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234000, time.FixedZone("CET", 3600))
	base := store.AuditEvent{
		ID: "evt-1", OccurredAt: at, UserID: "u-1", SessionID: "s-1", ActorID: "admin-1",
		IP: "192.0.2.1", UserAgent: "agent/1.0", RequestID: "req-1",
	}
	for _, tc := range []struct {
		typ  string
		data string
		want map[string]any
	}{
		{"user.logged_in", `{"device_id":"laptop","password":"hunter2"}`,
			map[string]any{"user_id": "u-1", "session_id": "s-1", "device_id": "laptop"}},
		{"login.failed", `{"reason":"bad_password","email":"ada@example.com"}`,
			map[string]any{"user_id": "u-1", "reason": "bad_password"}},
		{"password.reset_requested", `{"email":"ada@example.com","outcome":"mail_queued","token":"t"}`,
			map[string]any{"user_id": "u-1", "outcome": "mail_queued"}},
		{"session.revoked", `{"reason":"revoked_by_admin","revoked_sessions":2,"via":"api"}`,
			map[string]any{"user_id": "u-1", "session_id": "s-1", "actor_id": "admin-1", "reason": "revoked_by_admin", "revoked_sessions": 2.0}},
		{"signing_key.rotated", `{"kid":"k2","retired":["k1"],"activate_in_seconds":0,"private_key":"x"}`,
			map[string]any{"actor_id": "admin-1", "kid": "k2", "retired": []any{"k1"}, "activate_in_seconds": 0.0}},
		{"refresh_token.used", `not json`, map[string]any{"user_id": "u-1", "session_id": "s-1"}},
		{"user.updated", `{"changes":["role"]}`, map[string]any{}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			e := base
			e.Type, e.Data = tc.typ, []byte(tc.data)
			b, err := webhook.Body(e)
			if err != nil {
				t.Fatalf("Body = %v", err)
			}
			var got struct {
				ID        string         `json:"id"`
				Type      string         `json:"type"`
				CreatedAt string         `json:"created_at"`
				Data      map[string]any `json:"data"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("Body = %s: %v", b, err)
			}
			if got.ID != "evt-1" || got.Type != tc.typ || got.CreatedAt != "2026-03-04T04:06:07.891234Z" || !reflect.DeepEqual(got.Data, tc.want) {
				t.Errorf("Body(%s) = %s, want data %v", tc.typ, b, tc.want)
			}
			if !strings.HasPrefix(string(b), `{"id":"evt-1","type":"`+tc.typ+`","created_at":`) {
				t.Errorf("Body(%s) = %s, want the fields in order id, type, created_at, data", tc.typ, b)
			}
			for _, secret := range []string{"192.0.2.1", "agent/1.0", "req-1", "ada@example.com", "hunter2", "private_key", `"token"`} {
				if strings.Contains(string(b), secret) {
					t.Errorf("Body(%s) = %s, holds %q", tc.typ, b, secret)
				}
			}
		})
	}
	// Every catalogue type has a whitelist.
	for _, typ := range store.WebhookEvents {
		e := base
		e.Type = typ
		b, _ := webhook.Body(e)
		if strings.Contains(string(b), `"data":{}`) {
			t.Errorf("Body(%s) = %s, want identifying fields", typ, b)
		}
	}
}
