// Package proxy owns the verifier's request handling: the reverse proxy that
// lets only requests with a valid access token reach the app, and the
// forward-auth endpoint that gives nginx, Traefik and Envoy the same
// decision. Verification itself is pkg/verify's.
package proxy

import (
	"net/http"
	"slices"
	"strings"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/urlpath"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// The identity headers the app receives (API.md section 6).
const (
	HeaderUserID         = "X-Auth-User-Id"
	HeaderRole           = "X-Auth-Role"
	HeaderTenantID       = "X-Auth-Tenant-Id"
	HeaderOrganizationID = "X-Auth-Organization-Id"
	HeaderSessionID      = "X-Auth-Session-Id"
	HeaderTokenID        = "X-Auth-Token-Id"
)

// StripAuthHeaders deletes every header a client could use to pose as an
// identity: any name that, lower-cased and with '_' read as '-', starts
// with "x-auth-". CGI-style servers read X_Auth_User_Id and X-Auth-User-Id
// as the same variable, so both spellings go.
func StripAuthHeaders(h http.Header) {
	for name := range h {
		if isAuthHeader(name) {
			delete(h, name)
		}
	}
}

func isAuthHeader(name string) bool { return headerNamed(name, "x-auth-", true) }

// untrustedOnly are first the headers frameworks route by in place of the request
// line when a front proxy vouches for them: X-Original-URL and
// X-Rewrite-URL (Symfony, Laminas, IIS), X-Forwarded-Prefix (Spring,
// ASP.NET Core, Traefik), X-Script-Name (the WSGI "ReverseProxied"
// recipe, which cuts it off the path), X-Forwarded-Uri, X-Original-URI,
// X-Original-Path, X-Envoy-Original-Path and X-Forwarded-Path. The
// verifier judged the request line; a client's "/public/a.css" carrying
// "X-Original-URL: /admin" would otherwise reach an app's /admin with no
// token.
//
// The forwarding headers follow, in the spellings the proxy does not
// itself replace: X-Forwarded-For, -Host and -Proto and Forwarded with
// '_' (CGI-style servers read X_Forwarded_For as X-Forwarded-For), and
// X-Real-IP, which many apps take for the client's address. Then the
// other scheme, port, host and address headers frameworks believe from a
// front proxy: X-Forwarded-Ssl and -Scheme (Rack takes "X-Forwarded-Ssl:
// on" for HTTPS ahead of the X-Forwarded-Proto the proxy sets),
// X-Forwarded-Port (Rack and Spring build URLs with it), -Server,
// X-Original-Host, and True-Client-IP, X-Client-IP and
// X-Cluster-Client-IP (CDN and load-balancer spellings of the client's
// address).
var untrustedOnly = []string{
	"x-original-url", "x-rewrite-url", "x-forwarded-prefix", "x-script-name",
	"x-forwarded-uri", "x-original-uri", "x-original-path", "x-envoy-original-path",
	"x-forwarded-path",
	"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "forwarded", "x-real-ip",
	"x-forwarded-ssl", "x-forwarded-scheme", "x-forwarded-port", "x-forwarded-server",
	"x-original-host", "true-client-ip", "x-client-ip", "x-cluster-client-ip",
}

// stripUntrusted deletes the untrustedOnly headers in either spelling
// (with '-' or '_', any case). The proxy calls it unless the peer is a
// trusted proxy, which answers for what it forwards, before it sets
// X-Forwarded-For, -Host and -Proto itself.
func stripUntrusted(h http.Header) {
	for name := range h {
		for _, o := range untrustedOnly {
			if headerNamed(name, o, false) {
				delete(h, name)
				break
			}
		}
	}
}

// headerNamed reports whether name, lower-cased and with '_' read as '-',
// is lower, or begins with it when prefix is set.
func headerNamed(name, lower string, prefix bool) bool {
	if len(name) < len(lower) || !prefix && len(name) != len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := name[i]
		if c == '_' {
			c = '-'
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// SetIdentity writes the identity headers of id, only those present.
func SetIdentity(h http.Header, id *verify.Identity) {
	// One backing array for all six values, each header a full slice of
	// one element, rather than an allocation per header: this runs on
	// every request the proxy lets through.
	vals := [...]string{id.Subject, id.Role, id.TenantID, id.OrganizationID, id.SessionID, id.TokenID}
	names := [...]string{HeaderUserID, HeaderRole, HeaderTenantID, HeaderOrganizationID, HeaderSessionID, HeaderTokenID}
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	if n == 0 {
		return
	}
	backing := make([]string, 0, n)
	for i, v := range vals {
		if v != "" {
			backing = append(backing, v)
			h[names[i]] = backing[len(backing)-1 : len(backing) : len(backing)]
		}
	}
}

// SetAllIdentity writes all six identity headers of id, with an empty
// value for a claim the token lacks (or for every one, given an empty
// Identity): a forwarding proxy that copies them into the app's request
// then overwrites whatever the client sent under those names.
func SetAllIdentity(h http.Header, id *verify.Identity) {
	h[HeaderUserID] = []string{id.Subject}
	h[HeaderRole] = []string{id.Role}
	h[HeaderTenantID] = []string{id.TenantID}
	h[HeaderOrganizationID] = []string{id.OrganizationID}
	h[HeaderSessionID] = []string{id.SessionID}
	h[HeaderTokenID] = []string{id.TokenID}
}

// StripCookies removes the cookies named names from h's Cookie headers,
// keeping every other cookie as sent and in order, and the header itself
// only while a cookie is left.
func StripCookies(h http.Header, names ...string) {
	vals := h.Values("Cookie")
	if len(vals) == 0 || !hasCookie(vals, names) {
		// Most requests carry none of names: they keep their header as
		// is, without the allocations of taking it apart.
		return
	}
	var kept []string
	for _, line := range vals {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			name, _, _ := strings.Cut(part, "=")
			if part == "" || slices.Contains(names, strings.TrimSpace(name)) {
				continue
			}
			kept = append(kept, part)
		}
	}
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h["Cookie"] = []string{strings.Join(kept, "; ")}
}

// hasCookie reports whether a cookie named one of names is in the Cookie
// header lines vals, reading them as StripCookies does.
func hasCookie(vals, names []string) bool {
	for _, line := range vals {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			name, _, _ := strings.Cut(part, "=")
			if slices.Contains(names, strings.TrimSpace(name)) {
				return true
			}
		}
	}
	return false
}

// PublicPaths decides which paths need no token: exact paths, and prefixes
// written with a trailing "/*".
type PublicPaths struct {
	exact    map[string]bool
	prefixes []string
}

// NewPublicPaths parses the --public-path values.
func NewPublicPaths(paths []string) *PublicPaths {
	p := &PublicPaths{exact: map[string]bool{}}
	for _, s := range paths {
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			p.prefixes = append(p.prefixes, prefix)
			continue
		}
		p.exact[s] = true
	}
	return p
}

// Match reports whether the request URI is public. Only a path in its
// plain, canonical form can be: "/public/../admin", "//admin" or an
// escaped slash would let an app that normalizes paths differently serve a
// private page without a token, so anything that is not canonical needs a
// token. So does any ';': Tomcat, Jetty and Spring cut a ";param" off each
// segment before they resolve dots, which makes "/public/..;/admin" their
// "/admin".
func (p *PublicPaths) Match(escapedPath string) bool {
	if len(p.exact) == 0 && len(p.prefixes) == 0 {
		return false
	}
	if !urlpath.Canonical(escapedPath) {
		return false
	}
	if p.exact[escapedPath] {
		return true
	}
	for _, prefix := range p.prefixes {
		if strings.HasPrefix(escapedPath, prefix) {
			return true
		}
	}
	return false
}

// keepUntyped makes an app's answer without a Content-Type go out without
// one: net/http otherwise guesses one from the first bytes (text/html for
// markup), and an app that left it out on purpose (user uploads served
// with nosniff) got an HTML page from the verifier. A nil entry stops the
// guess and is not sent; the app's Content-Type, when it sends one, is
// added to it, and the verifier's own answers set theirs.
func keepUntyped(h http.Header) { h["Content-Type"] = nil }

// dropOwnAnswerHeaders removes from an app's answer header what the
// verifier answers for itself: X-Request-Id, the id it logged and sent the
// app, which is on the answer already (an app that echoes it doubled it,
// one with an id of its own made two that disagree).
func dropOwnAnswerHeaders(h http.Header) { h.Del(httpserver.HeaderRequestID) }
