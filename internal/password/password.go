// Package password owns how the issuer stores and judges passwords: argon2id
// hashing with a bounded number of concurrent computations, verification of
// argon2id and legacy bcrypt hashes, and the password policy.
package password

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/argon2"
)

// Params are the argon2id cost parameters of new hashes.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over the memory
	Threads uint8
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultParams are the OWASP recommendation for argon2id: 19 MiB, two
// passes, one thread.
var DefaultParams = Params{Memory: 19456, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// ErrMalformedHash reports a stored hash that cannot be parsed, uses an
// unsupported algorithm, or asks for an absurd cost.
var ErrMalformedHash = errors.New("password: malformed hash")

// ErrBusy reports that a hash was refused without waiting because too many
// callers were already queued for a slot (see SetMaxWaiting).
var ErrBusy = errors.New("password: too many hashes waiting")

// limits bound what a stored hash may ask of us, so that a corrupted or
// hostile row (or a fuzzer) cannot make one verification take gigabytes or
// minutes. New hashes must respect them too, so every hash we write verifies.
type limits struct {
	maxMemory     uint32 // KiB
	maxTime       uint32
	minSaltLen    int
	maxSaltLen    int
	minKeyLen     int
	maxKeyLen     int
	maxBcryptCost int
}

var defaultLimits = limits{
	maxMemory:     1 << 20, // 1 GiB
	maxTime:       10,
	minSaltLen:    8,
	maxSaltLen:    64,
	minKeyLen:     16,
	maxKeyLen:     128,
	maxBcryptCost: 14,
}

// Hasher hashes and verifies passwords. At most maxConcurrent argon2 or bcrypt
// computations run at once, which keeps memory bounded under a login flood.
// A Hasher is safe for concurrent use.
type Hasher struct {
	params Params
	rand   io.Reader
	lim    limits

	sem        chan struct{}
	waiting    atomic.Int64
	maxWaiting atomic.Int64 // <= 0: unlimited
	computed   atomic.Uint64

	dummyOnce sync.Once
	dummy     string

	// mems holds the argon2 working memory of idle slots: a computation
	// takes one (or starts an empty one) and puts it back, so a flood of
	// logins keeps Slots() memories alive instead of allocating one per
	// hash. Its capacity is the number of slots, so putting back never
	// blocks.
	mems chan *argon2.Memory

	// slotHook, when set by tests, runs while a slot is held; the function
	// it returns runs just before the slot is released.
	slotHook func() (done func())
}

// MaxConcurrency bounds the computations a Hasher runs at once: each keeps
// its argon2id memory (19 MiB at the default parameters), so 256 keep 4.75
// GiB, and more slots than CPUs add no throughput.
const MaxConcurrency = 256

// NewHasher returns a Hasher that writes hashes with p, runs at most
// maxConcurrent computations at once (runtime.GOMAXPROCS(0) when
// maxConcurrent <= 0, MaxConcurrency at the most), and draws salts from
// rand.
func NewHasher(p Params, maxConcurrent int, rand io.Reader) *Hasher {
	if maxConcurrent <= 0 {
		maxConcurrent = runtime.GOMAXPROCS(0)
	}
	maxConcurrent = min(maxConcurrent, MaxConcurrency)
	return &Hasher{params: p, rand: rand, lim: defaultLimits,
		sem: make(chan struct{}, maxConcurrent), mems: make(chan *argon2.Memory, maxConcurrent)}
}

// idKey computes argon2id in an idle slot's memory. Call it with a slot
// held.
func (h *Hasher) idKey(pw string, salt []byte, p Params) []byte {
	var m *argon2.Memory
	select {
	case m = <-h.mems:
	default:
		m = new(argon2.Memory)
	}
	key := m.IDKey([]byte(pw), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	if m.Size() > h.HashMemory() {
		// A stored hash with a larger memory parameter: keeping its memory
		// would raise every slot's toward it.
		return key
	}
	select {
	case h.mems <- m:
	default: // not seen: at most Slots() memories exist; never block a slot on it
	}
	return key
}

// ReleaseMemory drops the argon2 memory idle slots keep (up to Slots()
// times HashMemory()), for the collector to return to the system; the
// next computations allocate it again. The issuer calls it when hashing
// has gone quiet after a burst.
func (h *Hasher) ReleaseMemory() {
	for {
		select {
		case <-h.mems:
		default:
			return
		}
	}
}

// SetMaxWaiting makes callers fail fast with ErrBusy instead of queueing when
// n callers are already waiting for a slot. n <= 0 lets every caller wait (the
// default). Safe to call while the Hasher is in use.
func (h *Hasher) SetMaxWaiting(n int) { h.maxWaiting.Store(int64(n)) }

// Hash returns the PHC string of pw under h's parameters:
// $argon2id$v=19$m=...,t=...,p=...$salt$hash, base64 without padding.
func (h *Hasher) Hash(ctx context.Context, pw string) (string, error) {
	if err := h.lim.check(h.params); err != nil {
		return "", fmt.Errorf("password: invalid hasher params: %w", err)
	}
	salt := make([]byte, h.params.SaltLen)
	if _, err := io.ReadFull(h.rand, salt); err != nil {
		return "", fmt.Errorf("password: read salt: %w", err)
	}
	var key []byte
	err := h.withSlot(ctx, func() {
		key = h.idKey(pw, salt, h.params)
	})
	if err != nil {
		return "", err
	}
	return encodePHC(h.params, salt, key), nil
}

// Verify reports whether pw matches encoded, an argon2id PHC string or a
// bcrypt hash ($2a$, $2b$, $2y$). needsRehash is true when the password
// matched but encoded is bcrypt or uses parameters other than h's, so the
// caller can store a fresh Hash. A wrong password is ok == false with a nil
// error; an unreadable hash is an error wrapping ErrMalformedHash. Other
// errors come from ctx or are ErrBusy.
func (h *Hasher) Verify(ctx context.Context, pw, encoded string) (ok, needsRehash bool, err error) {
	if strings.HasPrefix(encoded, "$argon2id$") {
		return h.verifyArgon2(ctx, pw, encoded)
	}
	if isBcryptPrefix(encoded) {
		return h.verifyBcrypt(ctx, pw, encoded)
	}
	return false, false, fmt.Errorf("%w: unknown algorithm", ErrMalformedHash)
}

func (h *Hasher) verifyArgon2(ctx context.Context, pw, encoded string) (ok, needsRehash bool, err error) {
	p, salt, key, err := h.lim.parsePHC(encoded)
	if err != nil {
		return false, false, err
	}
	var got []byte
	err = h.withSlot(ctx, func() {
		got = h.idKey(pw, salt, p)
	})
	if err != nil {
		return false, false, err
	}
	if subtle.ConstantTimeCompare(got, key) != 1 {
		return false, false, nil
	}
	return true, p != h.params, nil
}

func (h *Hasher) verifyBcrypt(ctx context.Context, pw, encoded string) (ok, needsRehash bool, err error) {
	if err := h.lim.checkBcrypt(encoded); err != nil {
		return false, false, err
	}
	var cmpErr error
	err = h.withSlot(ctx, func() {
		cmpErr = bcrypt.CompareHashAndPassword([]byte(encoded), []byte(pw))
	})
	switch {
	case err != nil:
		return false, false, err
	case cmpErr == nil:
		return true, true, nil
	case errors.Is(cmpErr, bcrypt.ErrMismatchedHashAndPassword):
		return false, false, nil
	default:
		return false, false, fmt.Errorf("%w: bcrypt: %w", ErrMalformedHash, cmpErr)
	}
}

// VerifyDummy spends the same work as a Verify of a hash written with h's
// parameters and discards the result. Call it for an unknown account so that
// the response time does not reveal whether the account exists. It only
// fails for the reasons Verify fails other than a malformed hash.
func (h *Hasher) VerifyDummy(ctx context.Context, pw string) error {
	h.dummyOnce.Do(func() {
		// No password hashes to an all-zero key in practice, and building
		// the string needs no argon2 run: only the verification must cost.
		h.dummy = encodePHC(h.params, make([]byte, h.params.SaltLen), make([]byte, h.params.KeyLen))
	})
	_, _, err := h.Verify(ctx, pw, h.dummy)
	return err
}

// Computed returns how many hash computations h has run (hashes and
// verifications alike), for metrics and for tests that prove a request did
// no hashing work.
func (h *Hasher) Computed() uint64 { return h.computed.Load() }

// Waiting returns how many callers are queued for a slot now.
func (h *Hasher) Waiting() int64 { return h.waiting.Load() }

// Running returns how many computations hold a slot now.
func (h *Hasher) Running() int { return len(h.sem) }

// Slots returns how many computations h runs at once at most.
func (h *Hasher) Slots() int { return cap(h.sem) }

// HashMemory returns the memory one argon2 computation with h's parameters
// works in. Each slot keeps its own from one computation to the next
// (until ReleaseMemory), so h holds at most Slots times HashMemory however
// many computations run in a row; a stored hash with a larger memory
// parameter costs its own while it is verified, and leaves it as garbage.
func (h *Hasher) HashMemory() int64 { return int64(h.params.Memory) * 1024 }

// Check applies p to the already normalized pw as p.Check does, and runs
// the strength estimate in one of h's slots: a worst-case estimate costs
// about as much CPU as a hash (BenchmarkEstimate), so under a flood of
// registrations it waits in h's queue, or fails with ErrBusy when the
// queue is full, as hashing does. Run unbounded, 500 clients registering
// with such passwords took the CPU from the hashes, which ran at 4.6 a
// second, and from every other request (the key set took up to 6 s). An
// estimate is not counted in Computed. Errors come from ctx or are ErrBusy.
func (h *Hasher) Check(ctx context.Context, p Policy, pw, email string) ([]apperr.FieldError, error) {
	return p.check(pw, email, func(estimate func()) error { return h.inSlot(ctx, estimate) })
}

// withSlot runs the hash computation f while holding one of h's slots.
func (h *Hasher) withSlot(ctx context.Context, f func()) error {
	return h.inSlot(ctx, func() {
		h.computed.Add(1)
		f()
	})
}

// inSlot runs f while holding one of h's slots.
func (h *Hasher) inSlot(ctx context.Context, f func()) error {
	if err := h.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-h.sem }()
	if h.slotHook != nil {
		defer h.slotHook()()
	}
	f()
	return nil
}

func (h *Hasher) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	default:
	}
	n := h.waiting.Add(1)
	defer h.waiting.Add(-1)
	if max := h.maxWaiting.Load(); max > 0 && n > max {
		return ErrBusy
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
