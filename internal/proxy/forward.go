package proxy

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// ForwardHeaders names the forwarding proxy whose header contract
// forward-auth believes for the original request's method and URI.
type ForwardHeaders string

// The header contracts. Each proxy sets (overwriting whatever the client
// sent) exactly the headers its contract reads; every other form a request
// carries came from the client.
const (
	// ForwardHeadersEnvoy (and the zero value) believes the request
	// itself: Envoy's ext_authz HTTP service sends the original method and
	// path (behind any path_prefix) as its own.
	ForwardHeadersEnvoy ForwardHeaders = "envoy"
	// ForwardHeadersNginx reads X-Original-Method and X-Original-URI,
	// which the auth_request location must set with proxy_set_header;
	// nginx's sub-request itself is always a GET.
	ForwardHeadersNginx ForwardHeaders = "nginx"
	// ForwardHeadersTraefik reads X-Forwarded-Method and X-Forwarded-Uri,
	// which forwardAuth sets (unless trustForwardHeader passes the
	// client's on).
	ForwardHeadersTraefik ForwardHeaders = "traefik"
	// ForwardHeadersCaddy reads X-Forwarded-Method and X-Forwarded-Uri,
	// which forward_auth sets.
	ForwardHeadersCaddy ForwardHeaders = "caddy"
)

// ParseForwardHeaders parses a --forward-auth-headers value.
func ParseForwardHeaders(s string) (ForwardHeaders, error) {
	switch f := ForwardHeaders(s); f {
	case ForwardHeadersEnvoy, ForwardHeadersNginx, ForwardHeadersTraefik, ForwardHeadersCaddy:
		return f, nil
	}
	return "", fmt.Errorf("unknown forward-auth header contract %q (want nginx, traefik, caddy or envoy)", s)
}

// The forms of the original URI and method some proxy uses.
var (
	uriHeaders    = []string{"X-Forwarded-Uri", "X-Original-Uri"}
	methodHeaders = []string{"X-Forwarded-Method", "X-Original-Method"}
)

// headerNames returns the URI and method headers of the contract, "" for
// Envoy's, which uses the request's own.
func (f ForwardHeaders) headerNames() (uri, method string) {
	switch f {
	case ForwardHeadersNginx:
		return "X-Original-Uri", "X-Original-Method"
	case ForwardHeadersTraefik, ForwardHeadersCaddy:
		return "X-Forwarded-Uri", "X-Forwarded-Method"
	}
	return "", ""
}

// Metrics reasons of the refusals only forward-auth makes.
const (
	// ReasonForwardedConflict is a request whose forms of the original
	// URI or method disagree or repeat.
	ReasonForwardedConflict verify.Reason = "forwarded_conflict"
	// ReasonUpgrade is a request for a protocol upgrade other than
	// WebSocket (h2c above all): forward-auth cannot drop it from what
	// the proxy forwards, so it refuses the request.
	ReasonUpgrade verify.Reason = "upgrade"
)

// ForwardAuth answers a forwarding proxy's sub-request: 200 with every
// identity header (empty when the token lacks the claim, or on a public
// path, so a proxy copying them overwrites whatever the client sent) when
// the token is valid or the original path is public, else the same 401
// the proxy mode gives.
//
// The 200 also carries the request's cookies without the issuer's refresh
// and CSRF cookies, which the proxy, not the verifier, forwards to the app
// (see setAppCookies).
//
// The original URI and method come only from the headers of the
// configured contract (Config.ForwardHeaders), and, for nginx, Traefik and
// Caddy, only from a trusted proxy: from anyone else the URI matches no
// public path and the method is unknown, which the CSRF rule treats as
// unsafe. A request whose forms of the original URI or method disagree,
// or repeat, is refused with the 401: nginx and Traefik pass a client's
// own headers on, and only the contract's were set by the proxy.
type ForwardAuth struct {
	gate
	hiddenCookies []string // never handed to the app
}

// NewForwardAuth returns the forward-auth handler.
func NewForwardAuth(v *verify.Verifier, cfg Config) *ForwardAuth {
	return &ForwardAuth{gate: newGate(v, cfg, true), hiddenCookies: hiddenCookies(cfg)}
}

// HeaderAppCookie is the forward-auth answer's copy of the request's
// Cookie header without the hidden cookies, always present and empty when
// none is left: the nginx and Caddy examples set the app's Cookie header
// from it (and send none when it is empty).
const HeaderAppCookie = "X-Auth-Cookie"

// headerEnvoyRemove lists, in an ext_authz HTTP service's OK answer, the
// request headers Envoy deletes before forwarding.
const headerEnvoyRemove = "X-Envoy-Auth-Headers-To-Remove"

// setAppCookies writes what the proxy is to forward to the app as its
// Cookie header: X-Auth-Cookie always (copied by name, even when empty,
// so Caddy's copy_headers never leaves the client's in place or writes
// its placeholder's text); Cookie itself only when a cookie is left, and
// only for the proxies that cannot rename a header (Traefik's
// authResponseHeaders deletes the client's Cookie and copies ours if we
// send one; Envoy's allowed_upstream_headers replaces it): sent to nginx
// too, the two copies of a 1.9 KB cookie jar took the answer's head past
// nginx's default 4 KiB buffer, and every request answered 500; and, when
// none is left, Envoy's instruction to delete the client's.
func (f *ForwardAuth) setAppCookies(h http.Header, req http.Header) {
	app := http.Header{"Cookie": req.Values("Cookie")}
	StripCookies(app, f.hiddenCookies...)
	// An HTTP/1.1 client may send several Cookie lines; the one header a
	// proxy copies must carry them all, joined as HTTP/2 joins crumbs.
	cookie := strings.Join(app.Values("Cookie"), "; ")
	h[HeaderAppCookie] = []string{cookie}
	if cookie == "" {
		h[headerEnvoyRemove] = []string{"cookie"}
		return
	}
	if f.cfg.ForwardHeaders == ForwardHeadersTraefik || f.cfg.ForwardHeaders == ForwardHeadersEnvoy {
		h["Cookie"] = []string{cookie}
	}
}

func (f *ForwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	method, path, ok := f.original(r)
	if !ok {
		f.reject(w, r, &verify.Error{Reason: ReasonForwardedConflict})
		return
	}
	up := upgradeOf(r.Header)
	if up == upgradeOther {
		f.reject(w, r, &verify.Error{Reason: ReasonUpgrade})
		return
	}
	id, ok := f.decide(w, r, method, path, up == upgradeNone)
	if !ok {
		return
	}
	if id == nil {
		id = &verify.Identity{}
	}
	SetAllIdentity(w.Header(), id)
	f.setAppCookies(w.Header(), r.Header)
	w.WriteHeader(http.StatusOK)
}

// original returns the forwarded request's method ("" when unknown) and
// escaped path ("" when unknown, matching no public path), or ok false
// when the request carries conflicting or repeated forms of either.
func (f *ForwardAuth) original(r *http.Request) (method, path string, ok bool) {
	uriName, methodName := f.cfg.ForwardHeaders.headerNames()
	var uri string
	if uriName == "" { // Envoy: the request is the original.
		uri, method = r.URL.RequestURI(), r.Method
	} else if f.cfg.TrustedProxies != nil && f.cfg.TrustedProxies.TrustedPeer(r) {
		uri, method = r.Header.Get(uriName), r.Header.Get(methodName)
	}
	if !agree(r.Header, uriHeaders, uri, uriName == "", func(a, b string) bool { return a == b }) {
		return "", "", false
	}
	if !agree(r.Header, methodHeaders, method, methodName == "", strings.EqualFold) {
		return "", "", false
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if uri == "" {
		return method, "", true
	}
	return method, escapedPathOf(uri), true
}

// agree reports whether each of names appears at most once and every one
// present carries the same value, which is also want when self is true (the
// request's own method or URI counts as one more form).
func agree(h http.Header, names []string, want string, self bool, eq func(a, b string) bool) bool {
	seen := self
	for _, name := range names {
		vals := h.Values(name)
		switch {
		case len(vals) == 0:
			continue
		case len(vals) > 1:
			return false
		case !seen:
			want, seen = vals[0], true
		case !eq(vals[0], want):
			return false
		}
	}
	return true
}

// escapedPathOf returns the path of a request URI as sent; a URI that does
// not parse yields "", which no public path matches. So does one with a
// "#": a request target has no fragment, and the proxy in front passes the
// URI to the app as it came, where Go's server keeps the "#" in the path
// and path.Clean resolves what follows it: cut at the "#",
// "/static/a.css#/../../admin/secret.txt" was judged as the public
// "/static/a.css" while a Go file server behind nginx served
// /admin/secret.txt without a token.
func escapedPathOf(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	if strings.ContainsRune(uri, '#') {
		return ""
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil || u.Opaque != "" || u.Host != "" {
		return ""
	}
	return u.EscapedPath()
}
