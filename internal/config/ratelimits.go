package config

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/ratelimit"
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
}

// Flags registers the rate-limit flags.
func (r *RateLimits) Flags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&r.Overrides, "rate-limit", nil, "override a rate limit, NAME=COUNT/PERIOD (repeatable; names: "+strings.Join(ratelimit.Names(), ", ")+")")
	fs.StringVar(&r.RateLimitStore, "rate-limit-store", "", "where rate-limit counters live: database (shared by every instance) or memory (this process only); default database on PostgreSQL, memory on SQLite")
}

// Validate checks the part.
func (r *RateLimits) Validate() error {
	var p problems
	for _, o := range r.Overrides {
		if _, _, err := ratelimit.ParseOverride(o); err != nil {
			p.addf("--rate-limit: %v", err)
		}
	}
	switch r.RateLimitStore {
	case "", RateLimitStoreDatabase, RateLimitStoreMemory:
	default:
		p.addf("--rate-limit-store must be database or memory, got %q", r.RateLimitStore)
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
