package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// --max-sessions-per-user reaches the login through the binary: the third
// device's login revokes the first (the least recently used), whose
// refresh token is refused and whose session is on the revocation feed;
// the session list holds the two left.
func TestSessionLimitFlag(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--max-sessions-per-user", "2")
	register(t, is, "devices@example.com")
	first := login(t, is, "devices@example.com", strongPassword, "phone")
	login(t, is, "devices@example.com", strongPassword, "laptop")
	third := login(t, is, "devices@example.com", strongPassword, "tablet")

	r := do(t, "GET", is.base+"/v1/sessions", nil, bearer(third.Access)...)
	wantStatus(t, "GET /v1/sessions", r, http.StatusOK)
	var devices []string
	for _, s := range r.json(t)["sessions"].([]any) {
		devices = append(devices, s.(map[string]any)["device_id"].(string))
	}
	if strings.Join(devices, ",") != "tablet,laptop" {
		t.Fatalf("sessions after a third device with a limit of 2 = %v, want tablet, laptop", devices)
	}
	r = refresh(t, is, first.Refresh)
	wantStatus(t, "refresh in the evicted session", r, http.StatusUnauthorized)
	if !strings.Contains(string(r.body), "refresh_token_revoked") {
		t.Errorf("refresh in the evicted session: %s, want refresh_token_revoked", r.body)
	}
	feed := do(t, "GET", is.base+"/v1/revocations", nil)
	wantStatus(t, "GET /v1/revocations", feed, http.StatusOK)
	if !strings.Contains(string(feed.body), first.SessionID) {
		t.Errorf("GET /v1/revocations = %s, want the evicted session %s", feed.body, first.SessionID)
	}
}
