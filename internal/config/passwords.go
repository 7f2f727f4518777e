package config

import "github.com/spf13/pflag"

// Passwords is how much password hashing the issuer does at once.
type Passwords struct {
	HashConcurrency int
	HashQueue       int
}

// Flags registers the password-hashing flags.
func (pw *Passwords) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&pw.HashConcurrency, "hash-concurrency", 0, "password hashes computed at once (0 = number of CPUs); bounds memory under a login flood")
	fs.IntVar(&pw.HashQueue, "hash-queue", 64, "password hashes that may wait for a free slot; beyond that login, register and password changes answer 503 with Retry-After at once (0 = wait without bound; at 0 or above 500 no soft memory limit is derived: set GOMEMLIMIT)")
}

// maxHashConcurrency bounds --hash-concurrency: 256 slots keep 4.75 GiB,
// and the derived memory limit grows with them.
const maxHashConcurrency = 256

// Validate checks the part.
func (pw *Passwords) Validate() error {
	var p problems
	if pw.HashConcurrency < 0 || pw.HashConcurrency > maxHashConcurrency {
		p.addf("--hash-concurrency must be from 0 to %d (each slot keeps 19 MiB; more slots than CPUs add no throughput), got %d", maxHashConcurrency, pw.HashConcurrency)
	}
	if pw.HashQueue < 0 {
		p.addf("--hash-queue must not be negative")
	}
	return p.err()
}
