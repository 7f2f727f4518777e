package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestSessionMaxLifetime runs the real issuer with --session-max-lifetime
// 5s beside the default 14-day refresh TTL: every token response promises
// at most what is left of the session, the session list shows its end (5 s
// after its login), refreshes keep working until then, and the first one
// after it is 401 refresh_token_expired.
func TestSessionMaxLifetime(t *testing.T) {
	const lifetime = 5 * time.Second
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL, "--session-max-lifetime", lifetime.String())
		email := uniqueEmail()
		register(t, is, email)
		r := do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword})
		wantStatus(t, "login", r, http.StatusOK)
		body := r.json(t)
		if in := body["refresh_expires_in"].(float64); in > lifetime.Seconds() {
			t.Errorf("login: refresh_expires_in = %v, want at most the session's %v (not the 14-day refresh TTL)", in, lifetime)
		}
		access, rt := body["access_token"].(string), body["refresh_token"].(string)

		r = do(t, "GET", is.base+"/v1/sessions", nil, bearer(access)...)
		wantStatus(t, "sessions", r, http.StatusOK)
		ss := r.json(t)["sessions"].([]any)
		if len(ss) != 1 {
			t.Fatalf("sessions = %v, want 1", ss)
		}
		sess := ss[0].(map[string]any)
		created, err1 := time.Parse(time.RFC3339, sess["created_at"].(string))
		end, err2 := time.Parse(time.RFC3339, sess["expires_at"].(string))
		if err1 != nil || err2 != nil || end.Sub(created) != lifetime {
			t.Fatalf("session created %v, expires %v: want it to expire %v after its login", sess["created_at"], sess["expires_at"], lifetime)
		}

		// Refresh until refused; the refusal must be the expiry, and only
		// once the end has passed.
		refreshes := 0
		deadline := time.Now().Add(time.Minute)
		for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			r := refresh(t, is, rt)
			if r.status != http.StatusOK {
				wantProblem(t, "refresh after the session's end", r, http.StatusUnauthorized, "refresh_token_expired")
				if now := time.Now(); now.Before(end) {
					t.Errorf("refresh refused at %v, before the session's end %v", now, end)
				}
				break
			}
			refreshes++
			m := r.json(t)
			if in := m["refresh_expires_in"].(float64); in > lifetime.Seconds() {
				t.Errorf("refresh %d: refresh_expires_in = %v, want at most %v", refreshes, in, lifetime)
			}
			rt = m["refresh_token"].(string)
		}
		if refreshes == 0 {
			t.Errorf("no refresh succeeded before the session's end")
		}
		if time.Now().After(deadline) {
			t.Fatalf("refreshes still succeed a minute after login, want refused after %v", lifetime)
		}
		// A new login is a new session with a new end.
		login(t, is, email, strongPassword, "")
	})
}
