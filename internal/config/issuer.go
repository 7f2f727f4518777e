package config

import (
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/apiversion"
	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// Issuer is the configuration of `issuer serve` (and of the subcommands
// that open the same database and keys).
type Issuer struct {
	Listen             string
	AdminListen        string
	DatabaseURL        string
	IssuerURL          string
	Audience           string
	AccessTokenTTL     time.Duration
	RefreshTokenTTL    time.Duration
	RefreshReuseLeeway time.Duration
	SessionMaxLifetime time.Duration
	KEKFile            string
	TrustedProxies     []string
	NoMigrate          bool
	LogLevel           string
	JWKSMaxAge         time.Duration
	KeyReloadInterval  time.Duration
	// ActivateIn is how long a new signing key is published before it
	// signs; KeyRotationInterval (0: off) rotates automatically.
	ActivateIn          time.Duration
	KeyRotationInterval time.Duration
	MaxBodyBytes        int64
	HashConcurrency     int
	HashQueue           int
	ClockSkew           time.Duration
	RateLimits          []string
	RateLimitStore      string
	DeprecatedVersions  []string
	BrowserOrigins      []string
	Demo                bool
	ReadHeaderTimeout   time.Duration
	ReadBodyTimeout     time.Duration

	MailMode             string
	SMTPURL              string
	SMTPTimeout          time.Duration
	MailFrom             string
	PublicURL            string
	MailMaxAttempts      int
	MailRetryBackoff     time.Duration
	MailPollInterval     time.Duration
	ResetTokenTTL        time.Duration
	VerifyTokenTTL       time.Duration
	RequireVerifiedEmail bool

	WebhookTimeout      time.Duration
	WebhookRetryBackoff time.Duration
	WebhookMaxAttempts  int
	WebhookAllowCIDRs   []string
	WebhookRetention    time.Duration
	WebhookConcurrency  int
}

// WebhookGuardFlags registers the outbound URL rules' allow-list, which
// `issuer serve` and the commands that register webhook URLs share.
func (c *Issuer) WebhookGuardFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.WebhookAllowCIDRs, "webhook-allow-cidr", nil, "a range (CIDR) webhook URLs may reach although it is loopback, private or otherwise internal, over http too, e.g. an in-cluster service network (repeatable)")
}

// WebhookAllow parses --webhook-allow-cidr (already validated).
func (c *Issuer) WebhookAllow() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range c.WebhookAllowCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Mail modes.
const (
	MailModeLog  = "log"
	MailModeSMTP = "smtp"
)

// ValidOrigin checks that o is a serialized origin as browsers send it in
// the Origin header: scheme://host[:port], nothing more.
func ValidOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.String() != o {
		return fmt.Errorf("%q is not an origin like https://app.example.com", o)
	}
	return nil
}

// Deprecations parses --deprecate-version (already validated).
func (c *Issuer) Deprecations() []apiversion.Deprecation {
	var out []apiversion.Deprecation
	for _, s := range c.DeprecatedVersions {
		if d, err := apiversion.Parse(s); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// Rate-limit stores.
const (
	RateLimitStoreDatabase = "database"
	RateLimitStoreMemory   = "memory"
)

// SharedRateLimits reports whether the rate-limit counters live in the
// database: by choice, or by default on PostgreSQL, where several instances
// must share them.
func (c *Issuer) SharedRateLimits() bool {
	if c.RateLimitStore == "" {
		return !c.Embedded()
	}
	return c.RateLimitStore == RateLimitStoreDatabase
}

// DefaultDatabaseURL is the embedded default: a SQLite file.
const DefaultDatabaseURL = "sqlite:./data/issuer.db"

// StoreFlags registers the flags every subcommand that opens the database
// and the keys needs.
func (c *Issuer) StoreFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.DatabaseURL, "database-url", DefaultDatabaseURL, "database: postgres://... or sqlite:PATH")
	fs.StringVar(&c.KEKFile, "kek-file", "./data/kek", "file holding the key-encryption key that seals the signing keys (base64 of 32 bytes); generated with a warning when missing and the database is the embedded SQLite default")
	fs.DurationVar(&c.AccessTokenTTL, "access-token-ttl", 15*time.Minute, "lifetime of access tokens")
	fs.DurationVar(&c.ClockSkew, "clock-skew", 30*time.Second, "clock skew allowed to verifiers; retired keys stay published this much longer")
	fs.DurationVar(&c.KeyReloadInterval, "key-reload-interval", 30*time.Second, "how often the signing keys are re-read from the database (other replicas' rotations are seen within it)")
	fs.DurationVar(&c.ResetTokenTTL, "reset-token-ttl", 30*time.Minute, "lifetime of password-reset links")
	fs.DurationVar(&c.VerifyTokenTTL, "verify-token-ttl", 48*time.Hour, "lifetime of email-verification links")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// ServeFlags registers the flags of `issuer serve`.
func (c *Issuer) ServeFlags(fs *pflag.FlagSet) {
	c.StoreFlags(fs)
	fs.StringVar(&c.Listen, "listen", ":8080", "address of the API listener")
	fs.StringVar(&c.AdminListen, "admin-listen", "127.0.0.1:9090", "address of the admin listener (metrics)")
	fs.StringVar(&c.IssuerURL, "issuer-url", "http://localhost:8080", "the iss claim and the discovery issuer")
	fs.StringVar(&c.Audience, "audience", "api", "the aud claim")
	fs.DurationVar(&c.RefreshTokenTTL, "refresh-token-ttl", 336*time.Hour, "lifetime of refresh tokens (each rotation starts a new one)")
	fs.DurationVar(&c.SessionMaxLifetime, "session-max-lifetime", 2160*time.Hour, "absolute lifetime of a session: it ends this long after its login however often it is refreshed (stored per session at login)")
	fs.DurationVar(&c.RefreshReuseLeeway, "refresh-reuse-leeway", 0, "grace period in which the latest rotated refresh token presented again gets the same successor instead of revoking the user's sessions (0 = strict)")
	fs.StringSliceVar(&c.TrustedProxies, "trusted-proxies", nil, "CIDRs of proxies whose X-Forwarded-For is believed (repeatable or comma-separated)")
	fs.BoolVar(&c.NoMigrate, "no-migrate", false, "do not apply pending migrations at start")
	fs.DurationVar(&c.JWKSMaxAge, "jwks-max-age", 5*time.Minute, "Cache-Control max-age of the JWK set")
	c.ActivateInFlag(fs)
	fs.DurationVar(&c.KeyRotationInterval, "key-rotation-interval", DefaultKeyRotationInterval, "rotate the signing key this often: a next key is always published, and signs this long after the active one started (0 = off; must be above --activate-in)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 64<<10, "largest accepted request body")
	fs.IntVar(&c.HashConcurrency, "hash-concurrency", 0, "password hashes computed at once (0 = number of CPUs); bounds memory under a login flood")
	fs.IntVar(&c.HashQueue, "hash-queue", 64, "password hashes that may wait for a free slot; beyond that login, register and password changes answer 503 with Retry-After at once (0 = wait without bound)")
	fs.StringArrayVar(&c.RateLimits, "rate-limit", nil, "override a rate limit, NAME=COUNT/PERIOD (repeatable; names: "+strings.Join(ratelimit.Names(), ", ")+")")
	fs.StringSliceVar(&c.BrowserOrigins, "browser-origins", nil, "origins (scheme://host[:port]) of browser apps: their logins and refreshes get the tokens in HttpOnly cookies, and only they pass the CSRF origin check (repeatable or comma-separated)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's headers")
	fs.DurationVar(&c.ReadBodyTimeout, "read-body-timeout", 30*time.Second, "time a client has to send a request's whole body once its headers are in; a slower body ends the request with 408 and the connection is closed")
	fs.BoolVar(&c.Demo, "demo", false, "serve the browser demo page at /demo/ (development only; see the README)")
	fs.StringArrayVar(&c.DeprecatedVersions, "deprecate-version", nil, "mark an API version deprecated: VERSION:deprecated=DATE[,sunset=DATE][,successor=URL] (repeatable; adds Deprecation, Sunset and Link headers to its responses)")
	fs.StringVar(&c.RateLimitStore, "rate-limit-store", "", "where rate-limit counters live: database (shared by every instance) or memory (this process only); default database on PostgreSQL, memory on SQLite")
	fs.StringVar(&c.MailMode, "mail-mode", MailModeLog, "log (mails, links included, go to the log: development only) or smtp")
	fs.StringVar(&c.SMTPURL, "smtp-url", "", "smtp://[user:pass@]host:port (STARTTLS, required unless the host is loopback) or smtps://... (implicit TLS)")
	fs.StringVar(&c.MailFrom, "mail-from", "Palisade <no-reply@localhost>", "From address of account mails")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL of the links in mails (default: --issuer-url)")
	fs.DurationVar(&c.SMTPTimeout, "smtp-timeout", 30*time.Second, "time allowed for one SMTP delivery (connect, TLS, AUTH and transfer)")
	fs.IntVar(&c.MailMaxAttempts, "mail-max-attempts", 10, "deliveries tried per mail before it is given up")
	fs.DurationVar(&c.MailRetryBackoff, "mail-retry-backoff", 30*time.Second, "wait after a mail's first failed delivery; it doubles with each further failure, up to 1h")
	fs.DurationVar(&c.MailPollInterval, "mail-poll-interval", 10*time.Second, "how often the mail queue is checked besides when a request queues a mail (mails of other replicas, retries, deliveries a crashed process left)")
	fs.BoolVar(&c.RequireVerifiedEmail, "require-verified-email", false, "refuse login (403 email_not_verified) until the email address is verified")
	c.WebhookGuardFlags(fs)
	fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", 5*time.Second, "time one webhook delivery has, connect to the end of the response; only a 2xx within it is success")
	fs.DurationVar(&c.WebhookRetryBackoff, "webhook-retry-backoff", 30*time.Second, "longest wait after a delivery's first failure; it doubles per failure, and the wait is drawn below it (full jitter)")
	fs.IntVar(&c.WebhookMaxAttempts, "webhook-max-attempts", 12, "attempts of one delivery before it is marked failed (12 with 30s backoff: about a day)")
	fs.DurationVar(&c.WebhookRetention, "webhook-retention", 720*time.Hour, "how long delivered and failed deliveries are kept for the deliveries list and redelivery")
	fs.IntVar(&c.WebhookConcurrency, "webhook-concurrency", 8, "webhook deliveries one replica sends at once")
}

// DefaultActivateIn and DefaultKeyRotationInterval are the key schedule's
// defaults: a new key is published 10 minutes before it signs, and keys
// rotate every 30 days.
const (
	DefaultActivateIn          = 10 * time.Minute
	DefaultKeyRotationInterval = 720 * time.Hour
)

// defaultJWKSMaxAge is the max-age the issuer sends when --jwks-max-age is 0.
const defaultJWKSMaxAge = 5 * time.Minute

// ActivateInFlag registers --activate-in, which `issuer serve` (scheduled
// rotations and the admin API) and `issuer keys rotate` share.
func (c *Issuer) ActivateInFlag(fs *pflag.FlagSet) {
	fs.DurationVar(&c.ActivateIn, "activate-in", DefaultActivateIn, "publish a new signing key this long before it signs, so every verifier's cached key set holds it first (at least --jwks-max-age plus --key-reload-interval)")
}

// Embedded reports whether the database is the SQLite embedded default,
// where missing secrets may be generated for a laptop.
func (c *Issuer) Embedded() bool { return strings.HasPrefix(c.DatabaseURL, "sqlite:") }

// Validate checks the configuration and reports every problem at once.
func (c *Issuer) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !strings.HasPrefix(c.DatabaseURL, "sqlite:") && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		add("--database-url must start with postgres://, postgresql:// or sqlite:")
	}
	if c.KEKFile == "" {
		add("--kek-file is required")
	}
	if c.AccessTokenTTL < time.Minute || c.AccessTokenTTL > 24*time.Hour {
		add("--access-token-ttl must be between 1m and 24h, got %s", c.AccessTokenTTL)
	}
	if c.ClockSkew < 0 || c.ClockSkew > 5*time.Minute {
		add("--clock-skew must be between 0 and 5m, got %s", c.ClockSkew)
	}
	if c.KeyReloadInterval < time.Second {
		add("--key-reload-interval must be at least 1s, got %s", c.KeyReloadInterval)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	for _, s := range c.WebhookAllowCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			add("--webhook-allow-cidr must be a CIDR like 10.96.0.0/12 or fd00::/8, got %q", s)
		}
	}
	return errors.Join(errs...)
}

// ValidateServe checks everything `issuer serve` needs.
func (c *Issuer) ValidateServe() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Listen == "" {
		add("--listen is required")
	}
	if u, err := url.Parse(c.IssuerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(c.IssuerURL, "/") {
		add("--issuer-url must be an absolute http(s) URL without a trailing slash, got %q", c.IssuerURL)
	}
	if c.Audience == "" {
		add("--audience is required")
	}
	if c.RefreshTokenTTL < time.Hour || c.RefreshTokenTTL > 90*24*time.Hour {
		add("--refresh-token-ttl must be between 1h and 2160h, got %s", c.RefreshTokenTTL)
	}
	if c.SessionMaxLifetime <= 0 {
		add("--session-max-lifetime must be above 0, got %s", c.SessionMaxLifetime)
	}
	if c.RefreshReuseLeeway < 0 || c.RefreshReuseLeeway > 5*time.Minute {
		add("--refresh-reuse-leeway must be between 0s and 5m, got %s", c.RefreshReuseLeeway)
	}
	if c.JWKSMaxAge < 0 || c.JWKSMaxAge > 24*time.Hour {
		add("--jwks-max-age must be between 0 and 24h, got %s", c.JWKSMaxAge)
	}
	// A verifier may hold the key set for its max-age, and a replica sees
	// another's new key within the reload interval: a key activating
	// sooner could sign a token whose kid a verifier has never seen.
	maxAge := c.JWKSMaxAge
	if maxAge == 0 {
		maxAge = defaultJWKSMaxAge
	}
	if c.ActivateIn < maxAge+c.KeyReloadInterval {
		add("--activate-in must be at least --jwks-max-age plus --key-reload-interval (%s), got %s: a verifier could meet a key it has not seen", maxAge+c.KeyReloadInterval, c.ActivateIn)
	}
	if c.KeyRotationInterval < 0 || (c.KeyRotationInterval > 0 && c.KeyRotationInterval <= c.ActivateIn) {
		add("--key-rotation-interval must be 0 (off) or above --activate-in (%s), got %s", c.ActivateIn, c.KeyRotationInterval)
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 10<<20 {
		add("--max-body-bytes must be between 1024 and 10485760, got %d", c.MaxBodyBytes)
	}
	if c.HashConcurrency < 0 {
		add("--hash-concurrency must not be negative")
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadHeaderTimeout > 10*time.Minute {
		add("--read-header-timeout must be above 0 and at most 10m, got %s", c.ReadHeaderTimeout)
	}
	if c.ReadBodyTimeout <= 0 || c.ReadBodyTimeout > 10*time.Minute {
		add("--read-body-timeout must be above 0 and at most 10m, got %s", c.ReadBodyTimeout)
	}
	if c.HashQueue < 0 {
		add("--hash-queue must not be negative")
	}
	for _, o := range c.RateLimits {
		if _, _, err := ratelimit.ParseOverride(o); err != nil {
			add("--rate-limit: %v", err)
		}
	}
	for _, o := range c.BrowserOrigins {
		if err := ValidOrigin(o); err != nil {
			add("--browser-origins: %v", err)
		}
	}
	for _, d := range c.DeprecatedVersions {
		if _, err := apiversion.Parse(d); err != nil {
			add("--deprecate-version: %v", err)
		}
	}
	switch c.RateLimitStore {
	case "", RateLimitStoreDatabase, RateLimitStoreMemory:
	default:
		add("--rate-limit-store must be database or memory, got %q", c.RateLimitStore)
	}
	switch c.MailMode {
	case MailModeLog:
	case MailModeSMTP:
		// Never echo the URL: it may carry the SMTP password.
		if !validSMTPURL(c.SMTPURL) {
			add("--smtp-url must be smtp://[user:pass@]host[:port] or smtps://[user:pass@]host[:port] with --mail-mode smtp")
		}
		if c.MailFrom == "" {
			add("--mail-from is required with --mail-mode smtp")
		}
	default:
		add("--mail-mode must be log or smtp, got %q", c.MailMode)
	}
	if c.MailFrom != "" {
		if _, err := mail.ParseAddress(c.MailFrom); err != nil {
			add("--mail-from must be an address like \"Palisade <no-reply@example.com>\", got %q", c.MailFrom)
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			add("--public-url must be an absolute http(s) URL without query or fragment, got %q", c.PublicURL)
		}
	}
	if c.SMTPTimeout < time.Second || c.SMTPTimeout > 10*time.Minute {
		add("--smtp-timeout must be between 1s and 10m, got %s", c.SMTPTimeout)
	}
	if c.MailMaxAttempts < 1 || c.MailMaxAttempts > 100 {
		add("--mail-max-attempts must be between 1 and 100, got %d", c.MailMaxAttempts)
	}
	if c.MailRetryBackoff < 10*time.Millisecond || c.MailRetryBackoff > time.Hour {
		add("--mail-retry-backoff must be between 10ms and 1h, got %s", c.MailRetryBackoff)
	}
	if c.MailPollInterval < 10*time.Millisecond || c.MailPollInterval > time.Hour {
		add("--mail-poll-interval must be between 10ms and 1h, got %s", c.MailPollInterval)
	}
	if c.WebhookTimeout < 100*time.Millisecond || c.WebhookTimeout > time.Minute {
		add("--webhook-timeout must be between 100ms and 1m, got %s", c.WebhookTimeout)
	}
	if c.WebhookRetryBackoff < 10*time.Millisecond || c.WebhookRetryBackoff > time.Hour {
		add("--webhook-retry-backoff must be between 10ms and 1h, got %s", c.WebhookRetryBackoff)
	}
	if c.WebhookMaxAttempts < 1 || c.WebhookMaxAttempts > 50 {
		add("--webhook-max-attempts must be between 1 and 50, got %d", c.WebhookMaxAttempts)
	}
	if c.WebhookRetention < time.Hour {
		add("--webhook-retention must be at least 1h, got %s", c.WebhookRetention)
	}
	if c.WebhookConcurrency < 1 || c.WebhookConcurrency > 256 {
		add("--webhook-concurrency must be between 1 and 256, got %d", c.WebhookConcurrency)
	}
	return errors.Join(errs...)
}

// validSMTPURL checks the shape of --smtp-url: scheme smtp or smtps, a
// host, an optional numeric port, nothing after it.
func validSMTPURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

// LinkBase is the base of the links in mails: --public-url, else
// --issuer-url, without a trailing slash.
func (c *Issuer) LinkBase() string {
	if c.PublicURL != "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	return strings.TrimSuffix(c.IssuerURL, "/")
}
