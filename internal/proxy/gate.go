package proxy

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// Config is what both modes share.
type Config struct {
	Public         *PublicPaths       // nil: every path needs a token
	TrustedProxies *clientip.Resolver // whose forwarding headers are believed
	Metrics        *Metrics           // may be nil
	Logger         *slog.Logger
	// IssuerPaths are the paths the issuer itself serves behind the
	// proxy: only there are its refresh and CSRF cookies forwarded. nil:
	// nowhere.
	IssuerPaths *PublicPaths
	// Cookies, when set, also accepts the access token from a browser's
	// cookie, under the CSRF rule for unsafe methods.
	Cookies *verify.CookieAuth
	// UpstreamProtocol is how the proxy speaks to the app: UpstreamHTTP1
	// (the zero value "" too) or UpstreamH2C. Forward-auth has no app.
	UpstreamProtocol string
	// UpstreamPing, with UpstreamH2C and the default transport, is how
	// long a connection to the app may stay silent before it is pinged
	// (see NewH2CTransport); 0 never pings.
	UpstreamPing time.Duration
	// ForwardHeaders is the proxy whose headers forward-auth believes
	// for the original method and URI; the zero value believes the
	// request itself, as Envoy sends it.
	ForwardHeaders ForwardHeaders
}

// hiddenCookies are the cookies the app never receives, in either mode:
// the issuer's refresh and CSRF cookies (under the configured name too).
// An app, or its logs, holding them could renew the session or answer the
// CSRF check.
func hiddenCookies(cfg Config) []string {
	names := []string{verify.DefaultRefreshCookie, verify.DefaultCSRFCookie}
	if cfg.Cookies != nil && cfg.Cookies.CSRFCookie != "" && cfg.Cookies.CSRFCookie != verify.DefaultCSRFCookie {
		names = append(names, cfg.Cookies.CSRFCookie)
	}
	return names
}

// gate is the decision both modes make: public, or a verified identity,
// or a 401 already written.
type gate struct {
	v   *verify.Verifier
	cfg Config
	// httpOnly answers every refusal in HTTP, a gRPC call's too: set
	// for forward-auth (see refuse).
	httpOnly bool
	// accessCookie is the access token's cookie name, which the app does
	// not receive beside an identity taken from the Authorization header.
	accessCookie string
}

func newGate(v *verify.Verifier, cfg Config, httpOnly bool) gate {
	g := gate{v: v, cfg: cfg, httpOnly: httpOnly, accessCookie: verify.DefaultAccessCookie}
	if cfg.Cookies != nil && cfg.Cookies.AccessCookie != "" {
		g.accessCookie = cfg.Cookies.AccessCookie
	}
	return g
}

// decide returns (identity, true) for a valid token, (nil, true) for a
// public path, and (nil, false) after writing the 401 (or the 403 of a
// cookie-authenticated request failing the CSRF rule). method is the
// original request's method, "" when unknown (which the CSRF rule treats
// as unsafe); public false means the path gives no exemption (a WebSocket
// upgrade needs a token everywhere).
func (g *gate) decide(w http.ResponseWriter, r *http.Request, method, escapedPath string, public bool) (*verify.Identity, bool) {
	if public && g.cfg.Public != nil && g.cfg.Public.Match(escapedPath) && (g.httpOnly || !httpserver.IsGRPC(r.Header) || grpcMethodPath(escapedPath)) {
		g.cfg.Metrics.outcome(OutcomePublic, "")
		return nil, true
	}
	tok, fromCookie, ok, err := g.cfg.Cookies.Authenticate(r, verify.AuthRequest{Method: method})
	if errors.Is(err, verify.ErrCSRF) {
		g.cfg.Metrics.outcome(OutcomeRejected, ReasonCSRF)
		g.cfg.Logger.DebugContext(r.Context(), "cookie-authenticated request failed the CSRF check", slog.String("method", httpserver.LogMethod(method)))
		g.refuse(w, r, refuseCSRF)
		return nil, false
	}
	if !ok {
		g.reject(w, r, &verify.Error{Reason: verify.ReasonMissing})
		return nil, false
	}
	start := time.Now()
	id, err := g.v.Verify(r.Context(), tok)
	g.cfg.Metrics.observe(time.Since(start))
	if err != nil {
		g.reject(w, r, err)
		return nil, false
	}
	if !fromCookie {
		// Nobody checked an access cookie sent beside the header: an app
		// reading its own cookie would take the client's word for who
		// it is. (A cookie that authenticated is the one checked.) One
		// that is no cookie to Go but is to some app's parser (after a
		// space, a non-breaking space) cannot be cut out: refused.
		StripCookies(r.Header, g.accessCookie)
		if verify.CookieMentions(r.Header, g.accessCookie) > 0 {
			g.reject(w, r, &verify.Error{Reason: ReasonSmuggledCookie})
			return nil, false
		}
	}
	g.cfg.Metrics.outcome(OutcomeAllowed, "")
	return id, true
}

// grpcMethodPath reports whether a gRPC call's path has the form
// /Service/Method. A gRPC server splits the path at its last '/', so under
// the public prefix /grpc.health.v1.Health/* the call
// /grpc.health.v1.Health/pkg.Private/Do is the service
// "grpc.health.v1.Health/pkg.Private" to it, which an app that forwards
// unknown services (a gRPC proxy) passes on: such a call is never public.
// Only in proxy mode, where the app sees the path judged: in front of
// forward-auth, a proxy may mount gRPC services under a prefix and rewrite
// it away.
func grpcMethodPath(escapedPath string) bool { return strings.Count(escapedPath, "/") == 2 }

// ReasonSmuggledCookie is the metrics reason of a request authenticated
// by its Authorization header whose Cookie lines still name the access
// cookie once its cookies of that name are removed: a second one hidden
// where Go's parser does not see it, but an app's might.
const ReasonSmuggledCookie verify.Reason = "smuggled_cookie"

// ReasonCSRF is the metrics reason of a cookie-authenticated request that
// failed the CSRF rule.
const ReasonCSRF verify.Reason = "csrf"

func (g *gate) reject(w http.ResponseWriter, r *http.Request, err error) {
	reason := verify.ReasonOf(err)
	g.cfg.Metrics.outcome(OutcomeRejected, reason)
	level := slog.LevelDebug
	switch {
	case errors.Is(err, verify.ErrUnknownKey) || reason == verify.ReasonUnknownKey:
		// Unknown keys after a rotation gone wrong deserve attention.
		level = slog.LevelInfo
	case reason == verify.ReasonKeyRevoked || reason == verify.ReasonRevocationsStale:
		// A token of a compromised key, or a verifier cut off from the
		// issuer's revocations, deserves attention too. A revoked session
		// is routine: the user logged out.
		level = slog.LevelInfo
	}
	// The reason and detail are safe to log: verify never puts the token
	// into an error.
	g.cfg.Logger.Log(r.Context(), level, "token rejected", slog.String("reason", string(reason)), slog.String("err", err.Error()))
	g.refuse(w, r, refuseUnauthenticated)
}
