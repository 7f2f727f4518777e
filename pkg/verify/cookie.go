package verify

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// Default names of the browser cookies and the CSRF header. The __Host-
// prefix makes browsers refuse the cookie unless it is Secure, host-only
// and for path /, so no sibling subdomain can plant or shadow it.
const (
	DefaultAccessCookie = "__Host-access_token"
	DefaultCSRFCookie   = "__Host-csrf_token"
	DefaultCSRFHeader   = "X-CSRF-Token"
)

// CookieAuth lets browser clients authenticate with the access-token cookie
// instead of the Authorization header. Because a browser attaches cookies to
// requests that other sites trigger, a cookie-authenticated request with an
// unsafe method must also come from an allowed Origin and repeat the CSRF
// cookie's value in the CSRF header (the double-submit pattern): a page of
// another origin can neither read that value nor set that header.
type CookieAuth struct {
	AccessCookie string   // default DefaultAccessCookie
	CSRFCookie   string   // default DefaultCSRFCookie
	CSRFHeader   string   // default DefaultCSRFHeader
	Origins      []string // allowed browser origins, e.g. "https://app.example.com"
}

func (c CookieAuth) withDefaults() CookieAuth {
	if c.AccessCookie == "" {
		c.AccessCookie = DefaultAccessCookie
	}
	if c.CSRFCookie == "" {
		c.CSRFCookie = DefaultCSRFCookie
	}
	if c.CSRFHeader == "" {
		c.CSRFHeader = DefaultCSRFHeader
	}
	return c
}

// AllowedOrigin reports whether the request's Origin header names one of
// the allowed origins.
func (c CookieAuth) AllowedOrigin(r *http.Request) bool {
	origins := r.Header.Values("Origin")
	return len(origins) == 1 && slices.Contains(c.Origins, origins[0])
}

// CheckCSRF reports whether a request authenticated by a cookie may
// proceed: safe methods (GET, HEAD, OPTIONS, TRACE) always, others only with
// an allowed Origin and a CSRF header equal to the CSRF cookie.
func (c CookieAuth) CheckCSRF(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	c = c.withDefaults()
	if !c.AllowedOrigin(r) {
		return false
	}
	cookie, err := r.Cookie(c.CSRFCookie)
	header := r.Header.Values(c.CSRFHeader)
	if err != nil || cookie.Value == "" || len(header) != 1 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(header[0])) == 1
}

// Token returns the request's access token and whether it came from the
// cookie: the Authorization header when there is one (a header cannot be
// forged cross-site, so it needs no CSRF check), else the access cookie.
func (c CookieAuth) Token(r *http.Request) (tok string, fromCookie, ok bool) {
	if len(r.Header.Values("Authorization")) > 0 {
		tok, ok = BearerToken(r)
		return tok, false, ok
	}
	cookie, err := r.Cookie(c.withDefaults().AccessCookie)
	if err != nil || cookie.Value == "" || strings.ContainsAny(cookie.Value, " \t") {
		return "", false, false
	}
	return cookie.Value, true, true
}

// csrfFailedBody is the answer to a cookie-authenticated request that fails
// the CSRF rule.
const csrfFailedBody = `{"type":"about:blank","title":"Forbidden","status":403,"code":"csrf_failed","detail":"A request authenticated by a cookie needs an allowed Origin and the CSRF token header."}`

// WriteCSRFFailed answers 403 problem+json with code csrf_failed.
func WriteCSRFFailed(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(csrfFailedBody))
}

// WithCookieAuth makes Middleware also accept the access token from c's
// cookie, refusing with 403 csrf_failed a cookie-authenticated unsafe
// request that fails c.CheckCSRF. The check runs before the token is
// verified, so a forged cross-site request costs no signature check.
func WithCookieAuth(c CookieAuth) MiddlewareOption {
	c = c.withDefaults()
	return func(m *middleware) { m.cookies = &c }
}
