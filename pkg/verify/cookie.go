package verify

import (
	"crypto/subtle"
	"errors"
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
	// DefaultRefreshCookie holds a browser's refresh token. Only the
	// issuer reads it; the verifier never forwards it to an app.
	DefaultRefreshCookie = "__Host-refresh_token"
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

// ErrCSRF is what Authenticate returns for a cookie-authenticated request
// that fails the CSRF rule; transports answer it with WriteCSRFFailed (or
// their own 403 csrf_failed).
var ErrCSRF = errors.New("verify: cookie-authenticated request failed the CSRF check")

// AuthRequest says how Authenticate reads a request.
type AuthRequest struct {
	// Method is the original request's method, which decides whether the
	// CSRF rule applies. "" means unknown (a forwarding proxy did not say)
	// and counts as unsafe.
	Method string
	// Cookie names the cookie holding the token; "" means the access
	// cookie.
	Cookie string
	// CookieOnly ignores the Authorization header: the cookie is the only
	// source (the issuer's refresh cookie, which is no access token).
	CookieOnly bool
}

// Authenticate is the one bearer/cookie/CSRF decision: every transport that
// accepts a token from a header or a cookie calls it. It returns the token
// and whether it came from a cookie, found false when the request carries
// none, or ErrCSRF.
//
//   - A request with an Authorization header (unless CookieOnly) is
//     authenticated by that header alone: its bearer token, or none when
//     the header is malformed, never a cookie behind it. A header cannot
//     be set cross-site, so no CSRF check applies.
//   - Otherwise, when c is not nil, the cookie's value, non-empty,
//     without whitespace and the only mention of its name
//     (CookieMentions): a browser holds
//     one __Host- cookie of a name for a host, so a second one was added
//     by hand, and a transport checking the first would pass the app a
//     second nobody checked (a parser keeping the last one reads that
//     one). A browser attaches cookies to requests other
//     sites trigger, so unless the method is safe (GET, HEAD, OPTIONS,
//     TRACE; an unknown method is not) the request must come from an
//     allowed Origin and repeat the CSRF cookie in the CSRF header, or
//     Authenticate returns ErrCSRF.
//
// A nil *CookieAuth accepts the Authorization header only.
func (c *CookieAuth) Authenticate(r *http.Request, req AuthRequest) (tok string, fromCookie, found bool, err error) {
	if !req.CookieOnly && (c == nil || len(r.Header.Values("Authorization")) > 0) {
		tok, found = BearerToken(r)
		return tok, false, found, nil
	}
	if c == nil {
		return "", false, false, nil
	}
	cc := c.withDefaults()
	name := req.Cookie
	if name == "" {
		name = cc.AccessCookie
	}
	cookies := r.CookiesNamed(name)
	if len(cookies) != 1 || CookieMentions(r.Header, name) != 1 || cookies[0].Value == "" || strings.ContainsAny(cookies[0].Value, " \t") {
		return "", false, false, nil
	}
	if !cc.csrfOK(r, req.Method) {
		return "", true, true, ErrCSRF
	}
	return cookies[0].Value, true, true, nil
}

// CookieMentions is how many times the Cookie lines of h name the
// cookie name, read as loosely as the parsers of apps behind a verifier
// read them: anywhere in a line, whatever separates it (Python's
// SimpleCookie splits on white space, some parsers strip a non-breaking
// space), case folded, and with '.', ' ', '[' and a percent-encoded '_'
// as '_' (PHP makes them '_' in cookie names). A well-formed single
// cookie of the name mentions it once; anything more may be a second one
// that some parser reads. Go's parser skips a cookie whose value it finds
// invalid, so counting what it parsed let such a second cookie through,
// forged, beside the one checked.
func CookieMentions(h http.Header, name string) int {
	want := foldCookieName(name)
	n := 0
	for _, line := range h.Values("Cookie") {
		n += strings.Count(foldCookieName(line), want)
	}
	return n
}

var cookieNameFolds = strings.NewReplacer(".", "_", " ", "_", "[", "_", "%5f", "_")

func foldCookieName(s string) string { return cookieNameFolds.Replace(strings.ToLower(s)) }

// csrfOK reports whether a request authenticated by a cookie may proceed:
// safe methods always, others (and an unknown method) only with an allowed
// Origin and a CSRF header equal to the CSRF cookie.
func (c CookieAuth) csrfOK(r *http.Request, method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
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
// request that fails the CSRF rule of Authenticate. The check runs before the token is
// verified, so a forged cross-site request costs no signature check. It
// cannot be combined with WithTokenFunc (see there).
func WithCookieAuth(c CookieAuth) MiddlewareOption {
	c = c.withDefaults()
	return func(m *middleware) { m.cookies = &c }
}
