package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/urlpath"
)

// Verifier modes.
const (
	ModeProxy       = "proxy"
	ModeForwardAuth = "forward-auth"
)

// Verifier is the configuration of `verifier serve` (and, for the key and
// claim settings, of `verifier check`).
type Verifier struct {
	Listen          string
	AdminListen     string
	Mode            string
	Upstream        string
	JWKSURL         string
	JWKSFile        string
	Issuer          string
	Audience        string
	PublicPaths     []string
	IssuerPaths     []string
	ClockSkew       time.Duration
	TrustedProxies  []string
	ForwardHeaders  string
	BrowserOrigins  []string
	HS256SecretFile string
	CacheSize       int
	LogLevel        string

	RevocationURL          string
	RevocationPollInterval time.Duration
	RevocationMaxStaleness time.Duration
	RevocationFailClosed   bool

	ReadHeaderTimeout time.Duration
	ReadIdleTimeout   time.Duration
	ReadMinRate       int64

	// UpstreamProtocol is how the proxy speaks to the upstream: http1, or
	// h2c (HTTP/2 with prior knowledge, which gRPC needs).
	UpstreamProtocol string
	// UpstreamPingInterval, with h2c, is how long a connection to the
	// upstream may stay silent before it is pinged; 0 never pings.
	UpstreamPingInterval time.Duration
}

// KeyFlags registers the flags that say which tokens are valid.
func (c *Verifier) KeyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.JWKSURL, "jwks-url", "", "URL of the issuer's JWK set (e.g. http://issuer:8080/.well-known/jwks.json)")
	fs.StringVar(&c.JWKSFile, "jwks-file", "", "file holding a JWK set, reloaded when it changes (instead of --jwks-url)")
	fs.StringVar(&c.Issuer, "issuer", "", "required iss claim")
	fs.StringVar(&c.Audience, "audience", "", "required aud claim")
	fs.DurationVar(&c.ClockSkew, "clock-skew", 30*time.Second, "clock skew allowed on exp, nbf and iat")
	fs.StringVar(&c.HS256SecretFile, "hs256-secret-file", "", "file holding a shared secret; when set, HS256 tokens are accepted too")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.RevocationURL, "revocation-url", "", "URL of the issuer's revocation feed (e.g. http://issuer:8080/v1/revocations); tokens of a revoked session or key are refused")
	fs.DurationVar(&c.RevocationPollInterval, "revocation-poll-interval", 5*time.Second, "how often the revocation feed is asked for changes")
	fs.DurationVar(&c.RevocationMaxStaleness, "revocation-max-staleness", time.Minute, "how long the revocation list may go without a successful refresh before it counts as stale")
	fs.BoolVar(&c.RevocationFailClosed, "revocation-fail-closed", false, "refuse every token while the revocation list is stale, instead of trusting signatures alone")
}

// ServeFlags registers the flags of `verifier serve`.
func (c *Verifier) ServeFlags(fs *pflag.FlagSet) {
	c.KeyFlags(fs)
	fs.StringVar(&c.Listen, "listen", ":8081", "address of the proxy or forward-auth listener")
	fs.StringVar(&c.AdminListen, "admin-listen", "127.0.0.1:9091", "address of the admin listener (/healthz, /readyz, /metrics)")
	fs.StringVar(&c.Mode, "mode", ModeProxy, "proxy (forward valid requests to --upstream) or forward-auth (answer 200 or 401 for nginx, Traefik, Envoy)")
	fs.StringVar(&c.Upstream, "upstream", "", "URL of the app behind the proxy (proxy mode): http(s)://host[:port], with an optional path prefixed to every request; no user, query or fragment")
	fs.StringVar(&c.UpstreamProtocol, "upstream-protocol", "http1", "proxy mode: how requests reach --upstream: http1, or h2c (HTTP/2 without TLS, with prior knowledge; needed for gRPC, and --upstream must be http://)")
	fs.DurationVar(&c.UpstreamPingInterval, "upstream-ping-interval", 0, "with --upstream-protocol h2c: ping a connection to the upstream that has been silent this long, and close it, ending its streams, when no answer comes within this long or 15s, whichever is shorter (0 = never; a grpc-go app must permit pings this often, see the README)")
	fs.StringSliceVar(&c.PublicPaths, "public-path", nil, "path served without a token: exact, or a prefix ending in /* (repeatable)")
	fs.StringSliceVar(&c.IssuerPaths, "issuer-path", nil, "proxy mode: path the issuer itself serves behind this verifier, exact or a prefix ending in /* (repeatable); only there does the upstream receive the issuer's refresh and CSRF cookies")
	fs.StringSliceVar(&c.BrowserOrigins, "browser-origins", nil, "origins of browser apps whose access-token cookie is accepted; a cookie-authenticated unsafe request must come from one of them and carry the X-CSRF-Token header equal to the CSRF cookie (repeatable or comma-separated)")
	fs.StringSliceVar(&c.TrustedProxies, "trusted-proxies", nil, "CIDRs whose forwarding headers are believed (X-Forwarded-For and, in proxy mode, X-Original-URL, X-Forwarded-Prefix, X-Script-Name and the like, dropped from anyone else; in forward-auth mode also the original method and URI of --forward-auth-headers nginx, traefik or caddy)")
	fs.StringVar(&c.ForwardHeaders, "forward-auth-headers", "", "forward-auth mode: the proxy whose headers carry the original method and URI: nginx (X-Original-Method, X-Original-URI), traefik or caddy (X-Forwarded-Method, X-Forwarded-Uri), both only from --trusted-proxies; envoy (the request's own method and path)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's headers")
	fs.DurationVar(&c.ReadIdleTimeout, "read-idle-timeout", 30*time.Second, "longest a request body may make no progress; a stalled body ends the request and the connection is closed (a long upload that keeps sending is never cut off; a gRPC call over HTTP/2 to an h2c upstream is bounded only until its first message)")
	fs.Int64Var(&c.ReadMinRate, "read-min-rate", 1024, "least average rate, in bytes per second, of a request body once its first --read-idle-timeout of waiting is spent; a slower body ends the request with 408 and the connection is closed (0 = no minimum)")
	fs.IntVar(&c.CacheSize, "cache-size", 10000, "verified tokens remembered until they expire (0 = off); skips repeated RSA work")
}

// ValidateKeys checks the key and claim settings.
func (c *Verifier) ValidateKeys() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case c.JWKSURL == "" && c.JWKSFile == "":
		add("one of --jwks-url and --jwks-file is required")
	case c.JWKSURL != "" && c.JWKSFile != "":
		add("--jwks-url and --jwks-file are exclusive")
	case c.JWKSURL != "":
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--jwks-url must be an absolute http(s) URL, got %q", c.JWKSURL)
		}
	}
	if c.Issuer == "" {
		add("--issuer is required")
	}
	if c.Audience == "" {
		add("--audience is required")
	}
	if c.ClockSkew < 0 || c.ClockSkew > 5*time.Minute {
		add("--clock-skew must be between 0 and 5m, got %s", c.ClockSkew)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateRevocations()...)
	return errors.Join(errs...)
}

// validateRevocations checks the revocation settings.
func (c *Verifier) validateRevocations() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.RevocationURL == "" {
		if c.RevocationFailClosed {
			add("--revocation-fail-closed needs --revocation-url")
		}
		return errs
	}
	if u, err := url.Parse(c.RevocationURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("--revocation-url must be an absolute http(s) URL, got %q", c.RevocationURL)
	}
	if c.RevocationPollInterval <= 0 || c.RevocationPollInterval > 10*time.Minute {
		add("--revocation-poll-interval must be above 0 and at most 10m, got %s", c.RevocationPollInterval)
	}
	if c.RevocationMaxStaleness <= c.RevocationPollInterval {
		add("--revocation-max-staleness must exceed --revocation-poll-interval (%s), got %s", c.RevocationPollInterval, c.RevocationMaxStaleness)
	}
	return errs
}

// ValidateServe checks everything `verifier serve` needs, reporting every
// problem at once.
func (c *Verifier) ValidateServe() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.ValidateKeys(); err != nil {
		errs = append(errs, err)
	}
	c.validateMode(add)
	if c.Listen == "" {
		add("--listen is required")
	}
	if c.AdminListen == "" {
		// net.Listen would take "" as every interface, metrics and all.
		add("--admin-listen is required")
	}
	if _, err := clientip.New(c.TrustedProxies); err != nil {
		add("--trusted-proxies: %v", err)
	}
	validatePathPatterns("--public-path", c.PublicPaths, add)
	validatePathPatterns("--issuer-path", c.IssuerPaths, add)
	if c.Mode == ModeForwardAuth && len(c.IssuerPaths) > 0 {
		add("--issuer-path is used only in proxy mode")
	}
	if c.CacheSize < 0 {
		add("--cache-size must not be negative")
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadHeaderTimeout > 10*time.Minute {
		add("--read-header-timeout must be above 0 and at most 10m, got %s", c.ReadHeaderTimeout)
	}
	if c.ReadIdleTimeout <= 0 || c.ReadIdleTimeout > 10*time.Minute {
		add("--read-idle-timeout must be above 0 and at most 10m, got %s", c.ReadIdleTimeout)
	}
	if c.ReadMinRate < 0 {
		add("--read-min-rate must not be negative (0 is no minimum), got %d", c.ReadMinRate)
	}
	for _, o := range c.BrowserOrigins {
		if err := ValidOrigin(o); err != nil {
			add("--browser-origins: %v", err)
		}
	}
	return errors.Join(errs...)
}

// validateMode checks --mode and what each mode needs and refuses: the
// upstream and its protocol, or the forward-auth proxy's headers.
func (c *Verifier) validateMode(add func(format string, args ...any)) {
	switch c.Mode {
	case ModeProxy:
		u, err := url.Parse(c.Upstream)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add("--upstream must be an absolute http(s) URL in proxy mode, got %q", c.Upstream)
		case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			// Credentials were dropped and a query was added to every
			// request, public ones included: neither is what it says.
			add("--upstream takes no user, query or fragment: scheme://host[:port][/path prefix]")
		case c.UpstreamProtocol == "h2c" && u.Scheme == "https":
			add("--upstream-protocol h2c needs an http:// --upstream (h2c is HTTP/2 without TLS), got %q", c.Upstream)
		}
	case ModeForwardAuth:
		if c.Upstream != "" {
			add("--upstream is not used in forward-auth mode")
		}
		switch c.ForwardHeaders {
		case "envoy":
		case "nginx", "traefik", "caddy":
			if len(c.TrustedProxies) == 0 {
				add("--forward-auth-headers %s needs --trusted-proxies: the proxy's headers are believed only from its address", c.ForwardHeaders)
			}
		case "":
			add("--forward-auth-headers is required in forward-auth mode: nginx, traefik, caddy or envoy")
		default:
			add("--forward-auth-headers must be nginx, traefik, caddy or envoy, got %q", c.ForwardHeaders)
		}
	default:
		add("--mode must be %s or %s, got %q", ModeProxy, ModeForwardAuth, c.Mode)
	}
	switch {
	case c.UpstreamProtocol != "" && c.UpstreamProtocol != "http1" && c.UpstreamProtocol != "h2c": // "" is the default, http1
		add("--upstream-protocol must be http1 or h2c, got %q", c.UpstreamProtocol)
	case c.UpstreamProtocol == "h2c" && c.Mode == ModeForwardAuth:
		add("--upstream-protocol h2c is used only in proxy mode")
	}
	switch {
	case c.UpstreamPingInterval < 0:
		add("--upstream-ping-interval must not be negative, got %s", c.UpstreamPingInterval)
	case c.UpstreamPingInterval > 0 && (c.UpstreamProtocol != "h2c" || c.Mode != ModeProxy):
		// HTTP/1.1 has no ping: the flag would silently do nothing.
		add("--upstream-ping-interval needs --upstream-protocol h2c in proxy mode")
	case c.UpstreamPingInterval > 0 && c.UpstreamPingInterval < time.Second:
		add("--upstream-ping-interval must be 0 or at least 1s, got %s", c.UpstreamPingInterval)
	}
	if c.Mode == ModeProxy && c.ForwardHeaders != "" {
		add("--forward-auth-headers is used only in forward-auth mode")
	}
}

// validatePathPatterns checks a list of path patterns: exact paths, or
// prefixes ending in /*, in the canonical form requests are matched in (a
// pattern with "%", ";", "//" or a dot segment could never match).
func validatePathPatterns(flag string, paths []string, add func(format string, args ...any)) {
	for _, p := range paths {
		switch {
		case !strings.HasPrefix(p, "/") || (strings.Contains(p, "*") && !strings.HasSuffix(p, "/*")) || strings.Count(p, "*") > 1:
			add("%s %q must start with / and may only end in /*", flag, p)
		case !urlpath.Canonical(strings.TrimSuffix(p, "*")):
			add("%s %q can never match: only a path without %%, ;, \\, // or a . or .. segment is matched", flag, p)
		}
	}
}
