package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// MaxHashConcurrency bounds --hash-concurrency. It is password.MaxConcurrency,
// the Hasher's own bound, written out because importing the password
// package would link its strength dictionaries (6.8 MB of live heap)
// into the verifier, which shares this package; TestHashBoundsAgree in
// issuerapp ties the two.
const MaxHashConcurrency = 256

// Passwords is how much password hashing the issuer does at once.
type Passwords struct {
	HashConcurrency int
	HashQueue       int
}

// Flags registers the password-hashing flags.
func (pw *Passwords) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&pw.HashConcurrency, "hash-concurrency", 0, fmt.Sprintf("password hashes computed at once (0 = number of CPUs; at most %d); bounds memory under a login flood", MaxHashConcurrency))
	fs.IntVar(&pw.HashQueue, "hash-queue", 64, "password hashes that may wait for a free slot; beyond that login, register and password changes answer 503 with Retry-After at once (0 = wait without bound; at 0 or above 500 no soft memory limit is derived: set GOMEMLIMIT)")
}

// Validate checks the part.
func (pw *Passwords) Validate() error {
	var p problems
	if pw.HashConcurrency < 0 || pw.HashConcurrency > MaxHashConcurrency {
		p.addf("--hash-concurrency must be from 0 to %d (each slot keeps 19 MiB; more slots than CPUs add no throughput), got %d", MaxHashConcurrency, pw.HashConcurrency)
	}
	if pw.HashQueue < 0 {
		p.addf("--hash-queue must not be negative")
	}
	return p.err()
}
