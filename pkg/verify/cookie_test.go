package verify_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/palisade-auth/palisade/pkg/verify"
)

func TestCookieAuthMiddleware(t *testing.T) {
	f := getFixture()
	v := newVerifier(t, verify.Config{})
	valid := f.ks.Token(t, "user-1")
	const origin = "https://app.example.com"
	mw := verify.Middleware(v, verify.WithCookieAuth(verify.CookieAuth{Origins: []string{origin}}))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := verify.FromContext(r.Context())
		w.Write([]byte(id.Subject))
	}))
	type req struct {
		method, origin, csrfCookie, csrfHeader, access, bearer string
	}
	tests := []struct {
		name       string
		req        req
		wantStatus int
		wantCode   string
	}{
		{"GET with the cookie", req{method: "GET", access: valid}, http.StatusOK, ""},
		{"GET with a bad cookie", req{method: "GET", access: "garbage"}, http.StatusUnauthorized, "invalid_token"},
		{"POST with cookie, origin and matching CSRF", req{"POST", origin, "c5rf", "c5rf", valid, ""}, http.StatusOK, ""},
		{"POST with cookie, no origin", req{"POST", "", "c5rf", "c5rf", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"POST with cookie, foreign origin", req{"POST", "https://evil.example", "c5rf", "c5rf", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"POST with cookie, no CSRF header", req{"POST", origin, "c5rf", "", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"POST with cookie, no CSRF cookie", req{"POST", origin, "", "c5rf", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"POST with cookie, mismatched CSRF", req{"POST", origin, "c5rf", "other", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"DELETE with cookie, no CSRF", req{"DELETE", origin, "", "", valid, ""}, http.StatusForbidden, "csrf_failed"},
		{"POST with a forged cookie fails CSRF first", req{"POST", "", "", "", "garbage", ""}, http.StatusForbidden, "csrf_failed"},
		// A header cannot be set cross-site: Bearer needs no CSRF token,
		// and it wins over a cookie.
		{"POST with Bearer, no CSRF", req{method: "POST", bearer: valid}, http.StatusOK, ""},
		{"POST with Bearer garbage and a valid cookie", req{method: "POST", origin: origin, csrfCookie: "x", csrfHeader: "x", access: valid, bearer: "garbage"}, http.StatusUnauthorized, "invalid_token"},
		{"nothing", req{method: "POST"}, http.StatusUnauthorized, "invalid_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.req.method, "/", nil)
			if tt.req.origin != "" {
				r.Header.Set("Origin", tt.req.origin)
			}
			if tt.req.csrfCookie != "" {
				r.AddCookie(&http.Cookie{Name: verify.DefaultCSRFCookie, Value: tt.req.csrfCookie})
			}
			if tt.req.csrfHeader != "" {
				r.Header.Set(verify.DefaultCSRFHeader, tt.req.csrfHeader)
			}
			if tt.req.access != "" {
				r.AddCookie(&http.Cookie{Name: verify.DefaultAccessCookie, Value: tt.req.access})
			}
			if tt.req.bearer != "" {
				r.Header.Set("Authorization", "Bearer "+tt.req.bearer)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantCode == "" {
				if rec.Body.String() != "user-1" {
					t.Errorf("body = %q, want the identity user-1", rec.Body)
				}
				return
			}
			var p struct{ Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != tt.wantCode {
				t.Errorf("body = %s, want problem code %q", rec.Body, tt.wantCode)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}
