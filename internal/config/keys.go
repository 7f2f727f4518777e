package config

import (
	"time"

	"github.com/spf13/pflag"
)

// Keys is what every issuer command that opens the signing keys needs: how
// long a retired key stays published (its tokens' lifetime plus the skew
// verifiers allow) and how often the keys are re-read.
type Keys struct {
	AccessTokenTTL    time.Duration
	ClockSkew         time.Duration
	KeyReloadInterval time.Duration
}

// Flags registers --access-token-ttl, --clock-skew and --key-reload-interval.
func (k *Keys) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&k.AccessTokenTTL, "access-token-ttl", 15*time.Minute, "lifetime of access tokens")
	fs.DurationVar(&k.ClockSkew, "clock-skew", 30*time.Second, "clock skew allowed to verifiers; retired keys stay published this much longer")
	fs.DurationVar(&k.KeyReloadInterval, "key-reload-interval", 30*time.Second, "how often the signing keys are re-read from the database (other replicas' rotations are seen within it)")
}

// Validate checks the part.
func (k *Keys) Validate() error {
	var p problems
	if k.AccessTokenTTL < time.Minute || k.AccessTokenTTL > 24*time.Hour {
		p.addf("--access-token-ttl must be between 1m and 24h, got %s", k.AccessTokenTTL)
	}
	if k.ClockSkew < 0 || k.ClockSkew > 5*time.Minute {
		p.addf("--clock-skew must be between 0 and 5m, got %s", k.ClockSkew)
	}
	if k.KeyReloadInterval < time.Second {
		p.addf("--key-reload-interval must be at least 1s, got %s", k.KeyReloadInterval)
	}
	return p.err()
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

// KeySchedule is when signing keys are published, sign and rotate, and how
// long verifiers may cache the JWK set.
type KeySchedule struct {
	JWKSMaxAge time.Duration
	// ActivateIn is how long a new signing key is published before it
	// signs; KeyRotationInterval (0: off) rotates automatically.
	ActivateIn          time.Duration
	KeyRotationInterval time.Duration
}

// Flags registers the schedule of `issuer serve`.
func (s *KeySchedule) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&s.JWKSMaxAge, "jwks-max-age", 5*time.Minute, "Cache-Control max-age of the JWK set")
	s.ActivateInFlag(fs)
	fs.DurationVar(&s.KeyRotationInterval, "key-rotation-interval", DefaultKeyRotationInterval, "rotate the signing key this often: a next key is always published, and signs this long after the active one started (0 = off; must be above --activate-in)")
}

// ActivateInFlag registers --activate-in alone, for `issuer keys rotate`
// (the domain bounds the value it is given).
func (s *KeySchedule) ActivateInFlag(fs *pflag.FlagSet) {
	fs.DurationVar(&s.ActivateIn, "activate-in", DefaultActivateIn, "publish a new signing key this long before it signs, so every verifier's cached key set holds it first (at least --jwks-max-age plus --key-reload-interval)")
}

// Validate checks the schedule against the keys' reload interval.
func (s *KeySchedule) Validate(k Keys) error {
	var p problems
	if s.JWKSMaxAge < 0 || s.JWKSMaxAge > 24*time.Hour {
		p.addf("--jwks-max-age must be between 0 and 24h, got %s", s.JWKSMaxAge)
	}
	// A verifier may hold the key set for its max-age, and a replica sees
	// another's new key within the reload interval: a key activating
	// sooner could sign a token whose kid a verifier has never seen.
	maxAge := s.JWKSMaxAge
	if maxAge == 0 {
		maxAge = defaultJWKSMaxAge
	}
	if s.ActivateIn < maxAge+k.KeyReloadInterval {
		p.addf("--activate-in must be at least --jwks-max-age plus --key-reload-interval (%s), got %s: a verifier could meet a key it has not seen", maxAge+k.KeyReloadInterval, s.ActivateIn)
	}
	if s.KeyRotationInterval < 0 || (s.KeyRotationInterval > 0 && s.KeyRotationInterval <= s.ActivateIn) {
		p.addf("--key-rotation-interval must be 0 (off) or above --activate-in (%s), got %s", s.ActivateIn, s.KeyRotationInterval)
	}
	return p.err()
}
