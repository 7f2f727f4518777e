package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisurl"
)

// Rate-limit stores.
const (
	RateLimitStoreDatabase = "database"
	RateLimitStoreMemory   = "memory"
)

// RateLimits is the rate limits' overrides and where their counters live.
type RateLimits struct {
	// Overrides are --rate-limit's NAME=COUNT/PERIOD values.
	Overrides      []string
	RateLimitStore string
	// RateLimitStoreTimeout bounds every call to a Redis store.
	RateLimitStoreTimeout time.Duration
}

// Flags registers the rate-limit flags.
func (r *RateLimits) Flags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&r.Overrides, "rate-limit", nil, "override a rate limit, NAME=COUNT/PERIOD (repeatable; names: "+strings.Join(ratelimit.Names(), ", ")+")")
	fs.StringVar(&r.RateLimitStore, "rate-limit-store", "", "where rate-limit counters live: database (shared by every instance), memory (this process only) or redis://[user:pass@]host:port[/db] (rediss:// for TLS; shared by every instance, off the database); default database on PostgreSQL, memory on SQLite")
	fs.DurationVar(&r.RateLimitStoreTimeout, "rate-limit-store-timeout", 200*time.Millisecond, "longest one call to a Redis rate-limit store waits; then the limit's failure policy applies, and the request's further calls fail at once")
}

// Validate checks the part.
func (r *RateLimits) Validate() error {
	var p problems
	for _, o := range r.Overrides {
		if _, _, err := ratelimit.ParseOverride(o); err != nil {
			p.addf("--rate-limit: %v", err)
		}
	}
	switch {
	case r.RateLimitStore == "", r.RateLimitStore == RateLimitStoreDatabase, r.RateLimitStore == RateLimitStoreMemory:
	case redisurl.Is(r.RateLimitStore):
		// Never echo the URL: it may carry the Redis password. What only
		// the client checks (the database number, its parameters) is
		// issuerapp.ValidateServe's.
		if _, _, err := redisurl.Split(r.RateLimitStore); err != nil {
			p.addf("--rate-limit-store: %v", err)
		}
	default:
		p.addf("--rate-limit-store must be database, memory or a redis:// or rediss:// URL, got %s", notAStore(r.RateLimitStore))
	}
	if r.RateLimitStoreTimeout < time.Millisecond || r.RateLimitStoreTimeout > 10*time.Second {
		p.addf("--rate-limit-store-timeout must be from 1ms to 10s, got %s", r.RateLimitStoreTimeout)
	}
	return p.err()
}

// shared reports whether the counters live in the database: by choice, or
// by default when it is not the embedded one, since several instances must
// share them.
func (r *RateLimits) shared(embedded bool) bool {
	if r.RateLimitStore == "" {
		return !embedded
	}
	return r.RateLimitStore == RateLimitStoreDatabase
}

// notAStore describes a --rate-limit-store value that names no store: a
// word as it is, anything else by what comes before its first ":", "/",
// "@", "?" or "#" alone, since the rest of a URL may hold a password
// (unix:///run/redis.sock?password=..., redis:/u:password@host).
func notAStore(v string) string {
	if i := strings.IndexAny(v, ":/@?#"); i >= 0 {
		return fmt.Sprintf("%q (the rest not shown)", v[:i])
	}
	return fmt.Sprintf("%q", v)
}
