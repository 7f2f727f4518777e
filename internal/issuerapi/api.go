// Package issuerapi owns the issuer's HTTP transport: routing, request
// decoding, the authentication step in front of protected routes, response
// encoding and the one table that turns domain errors into problem+json.
// Handlers decode, call the auth service, and encode; they hold no policy.
package issuerapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/palisade-auth/palisade/internal/apiversion"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/demo"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/problem"
	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// Config is the transport's settings.
type Config struct {
	IssuerURL    string        // the iss claim; base of the discovery document
	JWKSMaxAge   time.Duration // Cache-Control max-age of the key set
	MaxBodyBytes int64         // request body limit
	Deprecations []apiversion.Deprecation
	// BrowserOrigins get their tokens in cookies, and are the only origins
	// whose cookie-authenticated state changes pass the CSRF check.
	BrowserOrigins []string
	// Demo serves the browser demo page under /demo/ (development only).
	Demo bool
	// ResponseWriteTimeout bounds the writing of each 256 KiB of an
	// answer's body (default 15 s): a client that stops reading holds the
	// body in memory no longer than that.
	ResponseWriteTimeout time.Duration
}

// KeySet publishes the signing keys as a JWK set, and tells whether the
// key that signs now can sign (keys.Manager).
type KeySet interface {
	JWKS(ctx context.Context) ([]byte, error)
	CanSign(ctx context.Context) error
}

// Pinger reports whether the database answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are the API's collaborators.
type Deps struct {
	Auth        *auth.Service
	Keys        KeySet
	Verifier    *verify.Verifier
	DB          Pinger
	Idempotency *idempotency.Keys
	ClientIP    *clientip.Resolver
	Limiter     Limiter // nil: no rate limits
	Logger      *slog.Logger
	// Revocations serves GET /v1/revocations.
	Revocations *auth.RevocationFeed
}

// API is the issuer's HTTP surface.
type API struct {
	auth    *auth.Service
	keys    KeySet
	verify  *verify.Verifier
	db      Pinger
	idem    *idempotency.Keys
	ip      *clientip.Resolver
	limiter Limiter
	cookies verify.CookieAuth
	feed    *auth.RevocationFeed
	// fullFeed builds the full revocation list once for the readers
	// that ask at the same time.
	fullFeed *batcher[feedAnswer]
	bodies   heldBodies
	log      *slog.Logger
	cfg      Config
}

// New returns the API.
func New(d Deps, cfg Config) *API {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.JWKSMaxAge <= 0 {
		cfg.JWKSMaxAge = 5 * time.Minute
	}
	if cfg.ResponseWriteTimeout <= 0 {
		cfg.ResponseWriteTimeout = 15 * time.Second
	}
	a := &API{auth: d.Auth, keys: d.Keys, verify: d.Verifier, db: d.DB, idem: d.Idempotency, ip: d.ClientIP, limiter: d.Limiter, cookies: cookieAuth(cfg.BrowserOrigins), feed: d.Revocations, log: d.Logger, cfg: cfg}
	a.fullFeed = newBatcher(func(ctx context.Context) (feedAnswer, error) { return a.readFeed(ctx, "") })
	return a
}

// route is one endpoint: a ServeMux pattern, whether it needs an access
// token, its handler, and the rate limits in front of it.
type route struct {
	pattern   string
	protected bool
	handler   http.HandlerFunc
	// limits are checked in this order before the handler runs: per-user
	// ones after authentication, the others before it, each counted once
	// per request. See the README's rate-limit table.
	limits []rateRule
	// unlimited says why a route that anyone may call with a body has no
	// limit; every unauthenticated POST route has limits or this
	// (TestEveryAnonymousWriteIsLimited).
	unlimited string
}

func (a *API) routes() []route {
	return append([]route{
		{pattern: "POST /v1/register", handler: a.register, limits: []rateRule{
			{ratelimit.Register, perClient, refuse},
		}},
		// Login: the address, the (email, address) pair, and a looser
		// per-email ceiling that a client remembered for the account
		// passes (package ratelimit says why).
		{pattern: "POST /v1/login", handler: a.login, limits: []rateRule{
			{ratelimit.Login, perClient, refuse},
			{ratelimit.LoginEmailClient, perEmailClient, refuse},
			{ratelimit.LoginEmail, perEmail, refuseUnlessKnown},
		}},
		{pattern: "POST /v1/refresh", handler: a.refresh, limits: []rateRule{
			{ratelimit.Refresh, perClient, refuse},
		}},
		{pattern: "POST /v1/logout", handler: a.logout,
			unlimited: "answers 204 whatever the token, so a guess learns nothing, and it hashes no password"},
		{pattern: "POST /v1/logout/all", protected: true, handler: a.logoutAll},
		{pattern: "POST /v1/password/change", protected: true, handler: a.changePassword, limits: []rateRule{
			{ratelimit.PasswordChange, perUser, refuse},
		}},
		// Forgot: the address, and a quiet per-account cap: over it the
		// answer is the same 202 and no mail is sent.
		{pattern: "POST /v1/password/forgot", handler: a.forgotPassword, limits: []rateRule{
			{ratelimit.PasswordForgot, perClient, refuse},
			{ratelimit.PasswordForgotEmail, perEmail, quiet},
		}},
		{pattern: "POST /v1/password/reset", handler: a.resetPassword, limits: []rateRule{
			{ratelimit.PasswordReset, perClient, refuse},
		}},
		{pattern: "POST /v1/email/verify", handler: a.verifyEmail, limits: []rateRule{
			{ratelimit.EmailVerify, perClient, refuse},
		}},
		{pattern: "POST /v1/email/verify/resend", protected: true, handler: a.resendVerification, limits: []rateRule{
			{ratelimit.EmailVerify, perClient, refuse},
		}},
		{pattern: "GET /v1/me", protected: true, handler: a.me},
		{pattern: "GET /v1/sessions", protected: true, handler: a.sessions},
		{pattern: "DELETE /v1/sessions/{id}", protected: true, handler: a.revokeSession},
		{pattern: "GET /v1/revocations", handler: a.revocations,
			unlimited: "polled by every verifier, often several behind one address; it holds only opaque ids, costs one indexed query and answers 304 while nothing changed"},
		{pattern: "GET /health", handler: a.health},
		{pattern: "GET /.well-known/jwks.json", handler: a.jwks},
		{pattern: "GET /.well-known/openid-configuration", handler: a.discovery},
	}, a.adminRoutes()...)
}

// Patterns lists the routes, for documentation checks.
func (a *API) Patterns() []string {
	var out []string
	for _, r := range a.routes() {
		out = append(out, r.pattern)
	}
	return out
}

// Handler returns the routed handler, with the request id, recovery and
// access log around it. metrics may be nil.
func (a *API) Handler(metrics *httpserver.Metrics) http.Handler {
	mux := http.NewServeMux()
	var opts []verify.MiddlewareOption
	if len(a.cookies.Origins) > 0 {
		opts = append(opts, verify.WithCookieAuth(a.cookies))
	}
	authenticate := verify.Middleware(a.verify, opts...)
	for _, rt := range a.routes() {
		var h http.Handler = rt.handler
		before, after := splitLimits(rt)
		if rt.protected {
			// Authentication runs once, before the handler; the handler
			// reads the identity from the request context, and so do the
			// per-user limits in between.
			h = authenticate(a.limit(after, h))
		}
		h = a.limit(before, h)
		if metrics != nil {
			h = metrics.Wrap(rt.pattern, h)
		}
		mux.Handle(rt.pattern, h)
	}
	if a.cfg.Demo {
		mux.Handle("GET /demo/", demo.Handler())
	}
	var h http.Handler = problemMux{mux: mux, writeError: a.writeError}
	h = apiversion.Middleware(a.cfg.Deprecations, h)
	h = httpserver.Recover(a.log, httpserver.ServerOptions(h))
	h = httpserver.AccessLog(a.log, h)
	return httpserver.RequestID(h)
}

// problemMux answers unrouted requests (404, 405) with problem+json instead
// of ServeMux's plain text, keeping the Allow header it computes, and
// refuses URLs that are not text before any route sees them.
type problemMux struct {
	mux        *http.ServeMux
	writeError func(http.ResponseWriter, *http.Request, error)
}

func (p problemMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkURL(r); err != nil {
		p.writeError(w, r, err)
		return
	}
	if _, pattern := p.mux.Handler(r); pattern != "" {
		p.mux.ServeHTTP(w, r)
		return
	}
	rec := &headerRecorder{header: http.Header{}}
	p.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		problem.Write(w, problem.Problem{Status: http.StatusNotFound, Code: "not_found", Detail: "No such resource."})
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		problem.Write(w, problem.Problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Detail: "The method is not allowed on this resource."})
	default:
		// A redirect to the cleaned path: pass it on as the mux wrote it.
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
	}
}

type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(s int) {
	if h.status == 0 {
		h.status = s
	}
}

// meta collects what the audit trail records of the caller.
func (a *API) meta(r *http.Request) auth.Meta {
	return auth.Meta{
		IP:        a.ip.String(r),
		UserAgent: r.UserAgent(),
		RequestID: httpserver.RequestIDFromContext(r.Context()),
	}
}
