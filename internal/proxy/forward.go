package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// ForwardAuth answers a forwarding proxy's sub-request: 200 with the
// identity headers when the token is valid or the original path is public,
// else the same 401 the proxy mode gives.
//
// The original URI comes from X-Forwarded-Uri (Traefik) or X-Original-URI
// (nginx auth_request) only when the caller is a trusted proxy; otherwise,
// as with Envoy's ext_authz HTTP service, which sends the original path as
// the request path, the request's own path counts.
type ForwardAuth struct {
	gate
}

// NewForwardAuth returns the forward-auth handler.
func NewForwardAuth(v *verify.Verifier, cfg Config) *ForwardAuth {
	return &ForwardAuth{gate{v: v, cfg: cfg}}
}

func (f *ForwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	id, ok := f.decide(w, r, f.originalMethod(r), f.originalPath(r))
	if !ok {
		return
	}
	if id != nil {
		SetIdentity(w.Header(), id)
	}
	w.WriteHeader(http.StatusOK)
}

// originalMethod is the forwarded request's method, from X-Forwarded-Method
// (Traefik) or X-Original-Method (nginx, when configured) of a trusted
// proxy; else the request's own, as Envoy sends it.
func (f *ForwardAuth) originalMethod(r *http.Request) string {
	if f.cfg.TrustedProxies != nil && f.cfg.TrustedProxies.TrustedPeer(r) {
		for _, h := range []string{"X-Forwarded-Method", "X-Original-Method"} {
			if v := r.Header.Get(h); v != "" {
				return strings.ToUpper(v)
			}
		}
	}
	return r.Method
}

func (f *ForwardAuth) originalPath(r *http.Request) string {
	if f.cfg.TrustedProxies == nil || !f.cfg.TrustedProxies.TrustedPeer(r) {
		return r.URL.EscapedPath()
	}
	for _, h := range []string{"X-Forwarded-Uri", "X-Original-Uri"} {
		if v := r.Header.Get(h); v != "" {
			return escapedPathOf(v)
		}
	}
	return r.URL.EscapedPath()
}

// escapedPathOf returns the path of a request URI as sent; a URI that does
// not parse yields "", which no public path matches.
func escapedPathOf(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil || u.Opaque != "" || u.Host != "" {
		return ""
	}
	return u.EscapedPath()
}
