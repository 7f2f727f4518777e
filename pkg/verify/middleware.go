package verify

import (
	"errors"
	"net/http"
	"strings"
)

// unauthorizedBody is the one answer to every refused token (API.md
// section 1): the client never learns which check failed, since that would
// help an attacker tune a forgery.
const unauthorizedBody = `{"type":"about:blank","title":"Unauthorized","status":401,"code":"invalid_token","detail":"The access token is missing or invalid."}`

// WriteUnauthorized answers 401 with the problem+json body and the headers
// every transport of the verifier uses for a missing or invalid token
// (RFC 6750 section 3, RFC 9457).
func WriteUnauthorized(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(unauthorizedBody))
}

// BearerToken returns the token of the request's Authorization header
// (RFC 6750 section 2.1). The scheme is case-insensitive and surrounding
// spaces are tolerated; more than one Authorization header, another scheme
// or a token containing whitespace yields false.
func BearerToken(r *http.Request) (string, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// MiddlewareOption configures Middleware.
type MiddlewareOption func(*middleware)

// OnReject registers fn to be called with every refused request and the
// *Error saying why (ReasonMissing when there was no token), before the 401
// is written: the place to log or count reasons.
func OnReject(fn func(r *http.Request, err error)) MiddlewareOption {
	return func(m *middleware) { m.onReject = fn }
}

// WithTokenFunc replaces BearerToken as the way the token is taken from a
// request, for example to read another header. It cannot be combined with
// WithCookieAuth, which decides itself between the header and the cookie
// (and applies the CSRF rule to the cookie): Middleware panics when given
// both, rather than silently ignoring one.
func WithTokenFunc(fn func(r *http.Request) (string, bool)) MiddlewareOption {
	return func(m *middleware) { m.token = fn }
}

type middleware struct {
	v        *Verifier
	token    func(*http.Request) (string, bool) // nil: Authenticate
	cookies  *CookieAuth                        // nil: the Authorization header only
	onReject func(*http.Request, error)
}

// Middleware returns a handler wrapper that lets a request through only
// with a valid access token, with the Identity in its context (see
// FromContext). Anything else is answered by WriteUnauthorized; the next
// handler never runs. It panics on a nil Verifier, and on WithTokenFunc
// together with WithCookieAuth.
func Middleware(v *Verifier, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	if v == nil {
		panic("verify: Middleware with a nil Verifier")
	}
	m := &middleware{v: v}
	for _, o := range opts {
		o(m)
	}
	if m.token != nil && m.cookies != nil {
		panic("verify: Middleware with both WithTokenFunc and WithCookieAuth: the cookie rule takes the token from the header or the cookie itself")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := "", false
			if m.token != nil {
				tok, ok = m.token(r)
			} else {
				var err error
				tok, _, ok, err = m.cookies.Authenticate(r, AuthRequest{Method: r.Method})
				if errors.Is(err, ErrCSRF) {
					WriteCSRFFailed(w)
					return
				}
			}
			if !ok || tok == "" {
				m.reject(w, r, &Error{Reason: ReasonMissing})
				return
			}
			id, err := m.v.Verify(r.Context(), tok)
			if err != nil {
				m.reject(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), id)))
		})
	}
}

func (m *middleware) reject(w http.ResponseWriter, r *http.Request, err error) {
	if m.onReject != nil {
		m.onReject(r, err)
	}
	WriteUnauthorized(w)
}
