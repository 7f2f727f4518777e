package config

import (
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Tokens is what the issuer puts in the tokens it issues and how long a
// login lasts.
type Tokens struct {
	IssuerURL          string
	Audience           string
	RefreshTokenTTL    time.Duration
	RefreshReuseLeeway time.Duration
	SessionMaxLifetime time.Duration
	MaxSessionsPerUser int
}

// Flags registers the token flags.
func (t *Tokens) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&t.IssuerURL, "issuer-url", "http://localhost:8080", "the iss claim and the discovery issuer")
	fs.StringVar(&t.Audience, "audience", "api", "the aud claim")
	fs.DurationVar(&t.RefreshTokenTTL, "refresh-token-ttl", 336*time.Hour, "lifetime of refresh tokens (each rotation starts a new one)")
	fs.DurationVar(&t.SessionMaxLifetime, "session-max-lifetime", 2160*time.Hour, "absolute lifetime of a session: it ends this long after its login however often it is refreshed (stored per session at login)")
	fs.IntVar(&t.MaxSessionsPerUser, "max-sessions-per-user", 100, "active sessions one user may hold: a login past it revokes the least recently used")
	fs.DurationVar(&t.RefreshReuseLeeway, "refresh-reuse-leeway", 0, "grace period in which the latest rotated refresh token presented again gets the same successor instead of revoking the user's sessions (0 = strict)")
}

// Validate checks the part.
func (t *Tokens) Validate() error {
	var p problems
	if u, err := url.Parse(t.IssuerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(t.IssuerURL, "/") {
		p.addf("--issuer-url must be an absolute http(s) URL without a trailing slash, got %q", t.IssuerURL)
	}
	if t.Audience == "" {
		p.addf("--audience is required")
	}
	if t.RefreshTokenTTL < time.Hour || t.RefreshTokenTTL > 90*24*time.Hour {
		p.addf("--refresh-token-ttl must be between 1h and 2160h, got %s", t.RefreshTokenTTL)
	}
	if t.SessionMaxLifetime <= 0 {
		p.addf("--session-max-lifetime must be above 0, got %s", t.SessionMaxLifetime)
	}
	if t.MaxSessionsPerUser < 1 || t.MaxSessionsPerUser > 10000 {
		p.addf("--max-sessions-per-user must be between 1 and 10000, got %d", t.MaxSessionsPerUser)
	}
	if t.RefreshReuseLeeway < 0 || t.RefreshReuseLeeway > 5*time.Minute {
		p.addf("--refresh-reuse-leeway must be between 0s and 5m, got %s", t.RefreshReuseLeeway)
	}
	return p.err()
}
