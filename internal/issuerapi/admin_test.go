package issuerapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// TestAdminGate: the role check runs before the handler, so a non-admin
// never reaches decoding or validation.
func TestAdminGate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		id         verify.Identity
		wantStatus int
	}{
		{"Admin", verify.Identity{Subject: "u1", Role: "admin", SessionID: "s1"}, http.StatusOK},
		{"User", verify.Identity{Subject: "u1", Role: "user"}, http.StatusForbidden},
		{"NoRole", verify.Identity{Subject: "u1"}, http.StatusForbidden},
		{"AdminWithoutSubject", verify.Identity{Role: "admin"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *auth.Actor
			h := (&API{}).admin(func(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
				got = &actor
				w.WriteHeader(http.StatusOK)
			})
			r := httptest.NewRequest("PATCH", "/v1/admin/users/x", strings.NewReader("not json"))
			r = r.WithContext(verify.NewContext(r.Context(), &tc.id))
			w := httptest.NewRecorder()
			h(w, r)
			if w.Code != tc.wantStatus {
				t.Fatalf("admin(%+v) status = %d, want %d; body %s", tc.id, w.Code, tc.wantStatus, w.Body)
			}
			if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("admin(%+v) Cache-Control = %q, want no-store", tc.id, cc)
			}
			if tc.wantStatus != http.StatusOK {
				if got != nil {
					t.Errorf("admin(%+v) ran the handler, want it refused first", tc.id)
				}
				var p struct{ Code string }
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != "forbidden" {
					t.Errorf("admin(%+v) body = %s, want code forbidden", tc.id, w.Body)
				}
				return
			}
			if got == nil || got.UserID != tc.id.Subject || got.Role != tc.id.Role || got.SessionID != tc.id.SessionID {
				t.Errorf("admin(%+v) handler actor = %+v, want the identity's", tc.id, got)
			}
		})
	}
}

func TestQueryLimit(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"limit=1", 1, false},
		{"limit=500", 500, false},
		{"limit=501", 501, false}, // the service refuses it, with the same error
		{"limit=0", 0, true},
		{"limit=-3", 0, true},
		{"limit=ten", 0, true},
		{"limit=1.5", 0, true},
		{"limit=", 0, false},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := queryLimit(q)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("queryLimit(%q) = %d, %v; want %d, error %v", tc.query, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !apperr.Is(err, "malformed_request") {
			t.Errorf("queryLimit(%q) error = %v, want malformed_request", tc.query, err)
		}
	}
}

func TestQueryTime(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"2025-01-02T03:04:05Z", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"2025-01-02T03:04:05.123456Z", time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC), false},
		{"2025-01-02T04:04:05+01:00", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"2025-01-02", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"1735787045", time.Time{}, true},
	} {
		got, err := queryTime(url.Values{"since": {tc.value}}, "since")
		if !got.Equal(tc.want) || (err != nil) != tc.wantErr {
			t.Errorf("queryTime(%q) = %v, %v; want %v, error %v", tc.value, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestAuditView(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for _, tc := range []struct {
		name string
		e    auth.AuditEvent
		want string
	}{
		{"Bare", auth.AuditEvent{ID: "e1", Type: "signing_key.rotated", OccurredAt: at},
			`{"id":"e1","type":"signing_key.rotated","occurred_at":"2025-01-02T03:04:05.123456Z","data":{}}`},
		{"Full", auth.AuditEvent{ID: "e2", Type: "user.disabled", OccurredAt: at, UserID: "u", SessionID: "s", ActorID: "a",
			IP: "192.0.2.1", UserAgent: "ua", RequestID: "r", Data: []byte(`{"via": "api"}`)},
			`{"id":"e2","type":"user.disabled","occurred_at":"2025-01-02T03:04:05.123456Z","user_id":"u","session_id":"s","actor_id":"a","ip":"192.0.2.1","user_agent":"ua","request_id":"r","data":{"via":"api"}}`},
		{"UnreadableData", auth.AuditEvent{ID: "e3", Type: "x", OccurredAt: at, Data: []byte(`{`)},
			`{"id":"e3","type":"x","occurred_at":"2025-01-02T03:04:05.123456Z","data":{}}`},
	} {
		got, err := json.Marshal(auditView(tc.e))
		if err != nil || string(got) != tc.want {
			t.Errorf("auditView(%s) = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

func TestNewListNeverNull(t *testing.T) {
	b, _ := json.Marshal(newList[userJSON](nil, ""))
	if string(b) != `{"items":[],"next_cursor":null}` {
		t.Errorf("newList(nil, \"\") = %s, want empty items and a null cursor", b)
	}
	b, _ = json.Marshal(newList([]int{1}, "c"))
	if string(b) != `{"items":[1],"next_cursor":"c"}` {
		t.Errorf("newList([1], c) = %s", b)
	}
}

// TestOpenAPIAdminRoutes: every admin operation documents 401 and 403, and
// the forbidden code is a documented value.
func TestOpenAPIAdminRoutes(t *testing.T) {
	raw := readOpenAPI(t)
	if !strings.Contains(string(raw), `"forbidden"`) {
		t.Errorf("%s does not document the error code \"forbidden\"", openAPIPath)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, rt := range (&API{}).adminRoutes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("%s: not documented", rt.pattern)
			continue
		}
		for _, status := range []string{"401", "403"} {
			if _, ok := op.Responses[status]; !ok {
				t.Errorf("%s: response %s not documented", rt.pattern, status)
			}
		}
		if !rt.protected {
			t.Errorf("%s: not protected, want the access token required", rt.pattern)
		}
	}
}
