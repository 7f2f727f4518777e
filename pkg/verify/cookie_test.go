package verify_test

import (
	"encoding/json"
	"errors"
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

func TestAuthenticate(t *testing.T) {
	const origin = "https://app.example.com"
	c := &verify.CookieAuth{Origins: []string{origin}}
	type want struct {
		tok            string
		fromCookie, ok bool
		csrf           bool
	}
	tests := []struct {
		name   string
		c      *verify.CookieAuth
		req    verify.AuthRequest
		header http.Header
		want   want
	}{
		{"bearer", c, verify.AuthRequest{Method: "POST"}, http.Header{"Authorization": {"Bearer abc"}}, want{"abc", false, true, false}},
		{"malformed bearer hides the cookie", c, verify.AuthRequest{Method: "GET"}, http.Header{"Authorization": {"Basic x"}, "Cookie": {"__Host-access_token=c"}}, want{"", false, false, false}},
		{"cookie on GET", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c"}}, want{"c", true, true, false}},
		{"two cookies of the name, one line", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c; __Host-access_token=d"}}, want{"", false, false, false}},
		{"two cookies of the name, two lines", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c", "a=b; __Host-access_token=c"}}, want{"", false, false, false}},
		{"a second cookie of the name Go's parser skips", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {`__Host-access_token=c; __Host-access_token=d\`}}, want{"", false, false, false}},
		{"a skipped one first", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=d\xc3\xa9; __Host-access_token=c"}}, want{"", false, false, false}},
		{"a second one after a space, as SimpleCookie splits", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c; foo=bar __Host-access_token=d"}}, want{"", false, false, false}},
		{"a second one after a non-breaking space", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c; \xa0__Host-access_token=d"}}, want{"", false, false, false}},
		{"a second one as PHP names it", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access.token=d; __Host-access_token=c"}}, want{"", false, false, false}},
		{"a second one percent-encoded", c, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access%5Ftoken=d; __Host-access_token=c"}}, want{"", false, false, false}},
		{"cookie only: two refresh cookies", c, verify.AuthRequest{Method: "GET", Cookie: "__Host-refresh_token", CookieOnly: true}, http.Header{"Cookie": {"__Host-refresh_token=r; __Host-refresh_token=s"}}, want{"", false, false, false}},
		{"cookie on POST without the CSRF proof", c, verify.AuthRequest{Method: "POST"}, http.Header{"Cookie": {"__Host-access_token=c"}}, want{"", true, true, true}},
		{"cookie, unknown method counts as unsafe", c, verify.AuthRequest{}, http.Header{"Cookie": {"__Host-access_token=c"}}, want{"", true, true, true}},
		{"cookie, unknown method with the CSRF proof", c, verify.AuthRequest{}, http.Header{"Cookie": {"__Host-access_token=c; __Host-csrf_token=k"}, "Origin": {origin}, "X-Csrf-Token": {"k"}}, want{"c", true, true, false}},
		{"nil CookieAuth ignores cookies", nil, verify.AuthRequest{Method: "GET"}, http.Header{"Cookie": {"__Host-access_token=c"}}, want{"", false, false, false}},
		{"nil CookieAuth reads the header", nil, verify.AuthRequest{}, http.Header{"Authorization": {"Bearer abc"}}, want{"abc", false, true, false}},
		{"cookie only: the header is not the refresh token", c, verify.AuthRequest{Method: "POST", Cookie: "__Host-refresh_token", CookieOnly: true}, http.Header{"Authorization": {"Bearer abc"}}, want{"", false, false, false}},
		{"cookie only: named cookie under CSRF", c, verify.AuthRequest{Method: "POST", Cookie: "__Host-refresh_token", CookieOnly: true}, http.Header{"Authorization": {"Bearer abc"}, "Cookie": {"__Host-refresh_token=r"}}, want{"", true, true, true}},
		{"cookie only: named cookie with the CSRF proof", c, verify.AuthRequest{Method: "POST", Cookie: "__Host-refresh_token", CookieOnly: true}, http.Header{"Cookie": {"__Host-refresh_token=r; __Host-csrf_token=k"}, "Origin": {origin}, "X-Csrf-Token": {"k"}}, want{"r", true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header = tt.header
			tok, fromCookie, ok, err := tt.c.Authenticate(r, tt.req)
			got := want{tok, fromCookie, ok, errors.Is(err, verify.ErrCSRF)}
			if got != tt.want {
				t.Errorf("Authenticate(%v, %+v) = %+v, want %+v", tt.header, tt.req, got, tt.want)
			}
		})
	}
}
