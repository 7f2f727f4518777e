package password

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/palisade-auth/palisade/internal/apperr"
)

var cheap = Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func mustHash(t testing.TB, h *Hasher, pw string) string {
	t.Helper()
	enc, err := h.Hash(context.Background(), pw)
	if err != nil {
		t.Fatalf("Hash(%q) error: %v", pw, err)
	}
	return enc
}

// waitUntil spins (yielding, never sleeping) until cond holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func TestHashRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := NewHasher(cheap, 0, rand.Reader)
	pw := "correct horse battery staple"
	enc := mustHash(t, h, pw)
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("Hash() = %q, want prefix $argon2id$v=19$m=64,t=1,p=1$", enc)
	}
	if enc2 := mustHash(t, h, pw); enc2 == enc {
		t.Errorf("Hash() twice = same string %q, want fresh salts", enc)
	}

	tests := []struct {
		name, pw   string
		wantOK     bool
		wantRehash bool
	}{
		{"right", pw, true, false},
		{"wrong", pw + "!", false, false},
		{"empty", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rehash, err := h.Verify(ctx, tt.pw, enc)
			if err != nil || ok != tt.wantOK || rehash != tt.wantRehash {
				t.Errorf("Verify(%q) = %v, %v, %v, want %v, %v, nil", tt.pw, ok, rehash, err, tt.wantOK, tt.wantRehash)
			}
		})
	}
}

func TestVerifyBcrypt(t *testing.T) {
	ctx := context.Background()
	h := NewHasher(cheap, 0, rand.Reader)
	pw := "legacy password from the old system"
	b, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"$2a$", "$2b$", "$2y$"} {
		enc := prefix + string(b[4:])
		t.Run(prefix, func(t *testing.T) {
			if ok, rehash, err := h.Verify(ctx, pw, enc); !ok || !rehash || err != nil {
				t.Errorf("Verify(right, %s) = %v, %v, %v, want true, true, nil", enc[:7], ok, rehash, err)
			}
			if ok, rehash, err := h.Verify(ctx, "wrong", enc); ok || rehash || err != nil {
				t.Errorf("Verify(wrong, %s) = %v, %v, %v, want false, false, nil", enc[:7], ok, rehash, err)
			}
		})
	}
}

func TestVerifyNeedsRehash(t *testing.T) {
	ctx := context.Background()
	pw := "a password that outlives its params"
	old := mustHash(t, NewHasher(cheap, 0, rand.Reader), pw)
	tests := []struct {
		name   string
		params Params
		want   bool
	}{
		{"same", cheap, false},
		{"memory", Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"time", Params{Memory: 64, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"threads", Params{Memory: 64, Time: 1, Threads: 2, SaltLen: 16, KeyLen: 32}, true},
		{"salt", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 32, KeyLen: 32}, true},
		{"key", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 64}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHasher(tt.params, 0, rand.Reader)
			ok, rehash, err := h.Verify(ctx, pw, old)
			if !ok || rehash != tt.want || err != nil {
				t.Errorf("Verify() with %+v = %v, %v, %v, want true, %v, nil", tt.params, ok, rehash, err, tt.want)
			}
		})
	}
}

func TestVerifyMalformed(t *testing.T) {
	ctx := context.Background()
	h := NewHasher(cheap, 0, rand.Reader)
	good := mustHash(t, h, "x")
	parts := strings.Split(good, "$") // "", argon2id, v=19, m=..., salt, key
	join := func(p ...string) string { return strings.Join(p, "$") }
	tests := []struct{ name, enc string }{
		{"empty", ""},
		{"garbage", "not a hash at all"},
		{"dollars", "$$$$$"},
		{"argon2i", join("", "argon2i", parts[2], parts[3], parts[4], parts[5])},
		{"wrong version", join("", "argon2id", "v=16", parts[3], parts[4], parts[5])},
		{"no version", join("", "argon2id", parts[3], parts[4], parts[5])},
		{"bad base64 salt", join("", "argon2id", parts[2], parts[3], "!!!!", parts[5])},
		{"bad base64 key", join("", "argon2id", parts[2], parts[3], parts[4], parts[5]+"=")},
		{"short key", join("", "argon2id", parts[2], parts[3], parts[4], "AAAA")},
		{"huge m", join("", "argon2id", parts[2], "m=4294967295,t=1,p=1", parts[4], parts[5])},
		{"m over 1 GiB", join("", "argon2id", parts[2], "m=1048577,t=1,p=1", parts[4], parts[5])},
		{"m overflow", join("", "argon2id", parts[2], "m=99999999999,t=1,p=1", parts[4], parts[5])},
		{"huge t", join("", "argon2id", parts[2], "m=64,t=1000,p=1", parts[4], parts[5])},
		{"zero t", join("", "argon2id", parts[2], "m=64,t=0,p=1", parts[4], parts[5])},
		{"zero p", join("", "argon2id", parts[2], "m=64,t=1,p=0", parts[4], parts[5])},
		{"p over 255", join("", "argon2id", parts[2], "m=64,t=1,p=256", parts[4], parts[5])},
		{"params reordered", join("", "argon2id", parts[2], "t=1,m=64,p=1", parts[4], parts[5])},
		{"negative", join("", "argon2id", parts[2], "m=-64,t=1,p=1", parts[4], parts[5])},
		{"trailing part", good + "$x"},
		{"bcrypt too short", "$2a$04$abc"},
		{"bcrypt huge cost", "$2b$31$" + strings.Repeat("a", 53)},
		{"bcrypt bad char", "$2b$04$" + strings.Repeat("!", 53)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rehash, err := h.Verify(ctx, "x", tt.enc)
			if ok || rehash || !errors.Is(err, ErrMalformedHash) {
				t.Errorf("Verify(%q) = %v, %v, %v, want false, false, ErrMalformedHash", tt.enc, ok, rehash, err)
			}
		})
	}
}

func TestHashInvalidParams(t *testing.T) {
	h := NewHasher(Params{Memory: 64, Time: 0, Threads: 1, SaltLen: 16, KeyLen: 32}, 0, rand.Reader)
	if _, err := h.Hash(context.Background(), "x"); err == nil {
		t.Errorf("Hash() with time 0 = nil error, want an error")
	}
}

func TestVerifyDummy(t *testing.T) {
	h := NewHasher(cheap, 0, rand.Reader)
	var computed atomic.Int32
	h.slotHook = func() func() { computed.Add(1); return func() {} }
	for i := range 2 {
		if err := h.VerifyDummy(context.Background(), "anything"); err != nil {
			t.Fatalf("VerifyDummy() = %v, want nil", err)
		}
		if got := computed.Load(); got != int32(i+1) {
			t.Errorf("computations after %d VerifyDummy = %d, want %d", i+1, got, i+1)
		}
	}
	if ok, _, err := h.Verify(context.Background(), "anything", h.dummy); ok || err != nil {
		t.Errorf("Verify(dummy) = %v, %v, want false, nil", ok, err)
	}
	if p, _, _, err := h.lim.parsePHC(h.dummy); err != nil || p != cheap {
		t.Errorf("parsePHC(dummy) = %+v, %v, want %+v, nil", p, err, cheap)
	}
}

// TestConcurrencyBound holds every computation inside the slot until the
// test releases it, so the bound is observed without relying on timing.
func TestConcurrencyBound(t *testing.T) {
	const slots, callers = 2, 16
	h := NewHasher(cheap, slots, rand.Reader)
	enc := mustHash(t, h, "pw")
	var cur, peak atomic.Int32
	gate := make(chan struct{})
	h.slotHook = func() func() {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		return func() { cur.Add(-1) }
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			var err error
			switch i % 3 {
			case 0:
				_, err = h.Hash(context.Background(), "pw")
			case 1:
				_, _, err = h.Verify(context.Background(), "pw", enc)
			default:
				err = h.VerifyDummy(context.Background(), "pw")
			}
			errs <- err
		})
	}
	waitUntil(t, "slots full and the rest queued", func() bool {
		return cur.Load() == slots && h.waiting.Load() == callers-slots
	})
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("computation error: %v", err)
		}
	}
	if got := peak.Load(); got != slots {
		t.Errorf("peak concurrent computations = %d, want %d", got, slots)
	}
}

func TestSlotsAndHashMemory(t *testing.T) {
	tests := []struct{ slots, want int }{
		{1, 1},
		{4, 4},
		{0, runtime.GOMAXPROCS(0)},
	}
	for _, tt := range tests {
		h := NewHasher(DefaultParams, tt.slots, rand.Reader)
		if got := h.Slots(); got != tt.want {
			t.Errorf("NewHasher(DefaultParams, %d).Slots() = %d, want %d", tt.slots, got, tt.want)
		}
		if got, want := h.HashMemory(), int64(19<<20); got != want {
			t.Errorf("NewHasher(DefaultParams, %d).HashMemory() = %d, want %d", tt.slots, got, want)
		}
	}
}

// TestRunning checks what the issuer's memory returner relies on: a
// computation holding a slot shows in Running until it is done.
func TestRunning(t *testing.T) {
	h := NewHasher(cheap, 2, rand.Reader)
	entered, gate := make(chan struct{}), make(chan struct{})
	h.slotHook = func() func() {
		entered <- struct{}{}
		<-gate
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Hash(context.Background(), "pw")
		done <- err
	}()
	<-entered
	if got := h.Running(); got != 1 {
		t.Errorf("Running() during a hash = %d, want 1", got)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Hash() = %v", err)
	}
	if got := h.Running(); got != 0 {
		t.Errorf("Running() after the hash = %d, want 0", got)
	}
}

// fillSlots takes every slot of h, as if long computations were running.
func fillSlots(h *Hasher) (release func()) {
	for range cap(h.sem) {
		h.sem <- struct{}{}
	}
	return func() {
		for range cap(h.sem) {
			<-h.sem
		}
	}
}

func TestAcquireContext(t *testing.T) {
	t.Run("cancelled while waiting", func(t *testing.T) {
		h := NewHasher(cheap, 1, rand.Reader)
		release := fillSlots(h)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := h.Hash(ctx, "pw")
			done <- err
		}()
		waitUntil(t, "Hash to queue", func() bool { return h.waiting.Load() == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Hash(cancelled while waiting) = %v, want context.Canceled", err)
		}
		if n := h.waiting.Load(); n != 0 {
			t.Errorf("waiting after cancel = %d, want 0", n)
		}
		release()
		if n := h.Computed(); n != 0 {
			t.Errorf("Computed() after a cancelled wait and the slots freed = %d, want 0", n)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		h := NewHasher(cheap, 1, rand.Reader)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := h.Verify(ctx, "pw", mustHash(t, h, "pw")); !errors.Is(err, context.Canceled) {
			t.Errorf("Verify(cancelled ctx) = %v, want context.Canceled", err)
		}
		if err := h.VerifyDummy(ctx, "pw"); !errors.Is(err, context.Canceled) {
			t.Errorf("VerifyDummy(cancelled ctx) = %v, want context.Canceled", err)
		}
	})
}

func TestErrBusy(t *testing.T) {
	const maxWaiting = 3
	h := NewHasher(cheap, 2, rand.Reader)
	h.SetMaxWaiting(maxWaiting)
	release := fillSlots(h)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range maxWaiting {
		wg.Go(func() {
			if _, err := h.Hash(ctx, "pw"); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("queued Hash() = %v, want nil or context.Canceled", err)
			}
		})
	}
	waitUntil(t, "the queue to fill", func() bool { return h.waiting.Load() == maxWaiting })
	if _, err := h.Hash(context.Background(), "pw"); !errors.Is(err, ErrBusy) {
		t.Errorf("Hash() with full queue = %v, want ErrBusy", err)
	}
	if _, _, err := h.Verify(context.Background(), "pw", "$2b$04$"+strings.Repeat("a", 53)); !errors.Is(err, ErrBusy) {
		t.Errorf("Verify(bcrypt) with full queue = %v, want ErrBusy", err)
	}
	if err := h.VerifyDummy(context.Background(), "pw"); !errors.Is(err, ErrBusy) {
		t.Errorf("VerifyDummy() with full queue = %v, want ErrBusy", err)
	}
	if n := h.waiting.Load(); n != maxWaiting {
		t.Errorf("waiting after refusals = %d, want %d", n, maxWaiting)
	}
	release() // the queued callers now get slots and finish
	wg.Wait()
	cancel()
	h.SetMaxWaiting(0)
	if _, err := h.Hash(context.Background(), "pw"); err != nil {
		t.Errorf("Hash() after the queue drained = %v, want nil", err)
	}
}

// FuzzVerify feeds arbitrary stored hashes and passwords to Verify. The
// limits are lowered so a mutated hash cannot ask for real work.
func FuzzVerify(f *testing.F) {
	h := NewHasher(cheap, 0, rand.Reader)
	h.lim.maxMemory, h.lim.maxTime, h.lim.maxBcryptCost = 256, 2, bcrypt.MinCost
	good := mustHash(f, h, "password")
	b, err := bcrypt.GenerateFromPassword([]byte("password"), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, "password")
	f.Add(good, "wrong")
	f.Add(string(b), "password")
	f.Add("", "")
	f.Add("$argon2id$v=19$m=4294967295,t=4294967295,p=255$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "x")
	f.Add("$argon2id$v=19$m=64,t=1,p=1$$", "x")
	f.Add("$2y$31$"+strings.Repeat(".", 53), "x")
	f.Fuzz(func(t *testing.T, enc, pw string) {
		ok, rehash, err := h.Verify(context.Background(), pw, enc)
		if err != nil && !errors.Is(err, ErrMalformedHash) {
			t.Fatalf("Verify(%q, %q) error = %v, want nil or ErrMalformedHash", pw, enc, err)
		}
		if err != nil && (ok || rehash) {
			t.Fatalf("Verify(%q, %q) = %v, %v, %v, want false, false with an error", pw, enc, ok, rehash, err)
		}
	})
}

func BenchmarkHash(b *testing.B) {
	h := NewHasher(DefaultParams, 0, rand.Reader)
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Hash(ctx, "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSlotsReuseMemory: computations in a row, hashes and verifications
// alike, work in the one memory the slot keeps (argon2's
// TestMemoryIsReused shows a kept memory allocates nothing again), and
// ReleaseMemory gives it up.
func TestSlotsReuseMemory(t *testing.T) {
	h := NewHasher(cheap, 1, rand.Reader)
	ctx := context.Background()
	enc := mustHash(t, h, "pw")
	kept := <-h.mems
	h.mems <- kept
	for range 4 {
		mustHash(t, h, "pw")
		if ok, _, err := h.Verify(ctx, "pw", enc); !ok || err != nil {
			t.Fatalf("Verify = %v, %v, want true, nil", ok, err)
		}
	}
	if len(h.mems) != 1 {
		t.Fatalf("the slot keeps %d memories, want 1", len(h.mems))
	}
	if m := <-h.mems; m != kept || m.Size() != h.HashMemory() {
		t.Errorf("after 8 computations the slot keeps another memory (%p of %d bytes), want the first (%p of %d)", m, m.Size(), kept, h.HashMemory())
	} else {
		h.mems <- m
	}
	h.ReleaseMemory()
	if len(h.mems) != 0 {
		t.Errorf("ReleaseMemory left %d memories kept", len(h.mems))
	}
}

// TestLargerStoredMemoryIsNotKept: verifying a stored hash with a larger
// memory parameter than the Hasher's must not leave every later
// computation's slot holding that much.
func TestLargerStoredMemoryIsNotKept(t *testing.T) {
	h := NewHasher(cheap, 1, rand.Reader)
	big := cheap
	big.Memory = 4 * cheap.Memory
	enc := mustHash(t, NewHasher(big, 1, rand.Reader), "pw")
	if ok, _, err := h.Verify(context.Background(), "pw", enc); !ok || err != nil {
		t.Fatalf("Verify = %v, %v, want true, nil", ok, err)
	}
	select {
	case m := <-h.mems:
		t.Errorf("the slot kept a memory of %d bytes after a %d KiB verification, Hasher's is %d", m.Size(), big.Memory, h.HashMemory())
	default:
	}
}

// The slots are bounded whatever the machine: the default, one per CPU,
// went past MaxConcurrency on a host with more CPUs (or GOMAXPROCS), and
// the memory limit derived from the slots with it.
func TestSlotsAreBounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(MaxConcurrency + 44))
	for _, asked := range []int{0, MaxConcurrency + 1} {
		if got := NewHasher(cheap, asked, rand.Reader).Slots(); got != MaxConcurrency {
			t.Errorf("NewHasher(%d) on %d CPUs has %d slots, want %d", asked, runtime.GOMAXPROCS(0), got, MaxConcurrency)
		}
	}
	if got := NewHasher(cheap, 3, rand.Reader).Slots(); got != 3 {
		t.Errorf("NewHasher(3) has %d slots, want 3", got)
	}
}

// TestHasherCheckEstimatesInASlot: the strength estimate, which can cost
// as much as a hash, waits for a hashing slot, and is refused with ErrBusy
// when the queue is full; the cheap rules answer at once whatever the load,
// and the answers are Policy.Check's.
func TestHasherCheckEstimatesInASlot(t *testing.T) {
	const email = "ann.long@example.com"
	p := DefaultPolicy()
	h := NewHasher(cheap, 1, rand.Reader)
	h.SetMaxWaiting(1)
	release := fillSlots(h)

	queued := make(chan []apperr.FieldError, 1)
	go func() {
		fields, err := h.Check(context.Background(), p, "ann.long@example.com1", email)
		if err != nil {
			t.Errorf("queued Check = %v, want it to wait for the slot", err)
		}
		queued <- fields
	}()
	waitUntil(t, "the check to queue for the slot", func() bool { return h.Waiting() == 1 })
	if fields, err := h.Check(context.Background(), p, "correct horse battery staple", email); !errors.Is(err, ErrBusy) || fields != nil {
		t.Errorf("Check with the slot taken and the queue full = %v, %v; want nil, ErrBusy", fields, err)
	}
	for _, pw := range []string{"short", "password1234", strings.Repeat("x", 129)} {
		fields, err := h.Check(context.Background(), p, pw, email)
		if err != nil || fields == nil {
			t.Errorf("Check(%q) with the pool full = %v, %v; want its rule broken at once", pw, fields, err)
		}
	}
	release()
	if got := <-queued; len(got) != 1 || got[0].Code != codeTooWeak {
		t.Errorf("queued Check of a password made of the email = %v, want too_weak once it had the slot", got)
	}
	for _, pw := range []string{"correct horse battery staple", "ann.long@example.com1", "short", "password1234", worstCase} {
		fields, err := h.Check(context.Background(), p, pw, email)
		if want := p.Check(pw, email); err != nil || !slices.Equal(fields, want) {
			t.Errorf("Check(%q) = %v, %v; want Policy.Check's %v", pw, fields, err, want)
		}
	}
	if n := h.Computed(); n != 0 {
		t.Errorf("Computed() = %d after estimates alone, want 0: an estimate is not a hash", n)
	}
}
