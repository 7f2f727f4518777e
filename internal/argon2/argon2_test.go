package argon2

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"testing"

	upstream "golang.org/x/crypto/argon2"
)

// TestRFC9106Vector is the Argon2id test vector of RFC 9106 section 5.3,
// which has four lanes and a secret and associated data, none of which the
// upstream comparison below reaches.
func TestRFC9106Vector(t *testing.T) {
	password := bytes.Repeat([]byte{0x01}, 32)
	salt := bytes.Repeat([]byte{0x02}, 16)
	secret := bytes.Repeat([]byte{0x03}, 8)
	data := bytes.Repeat([]byte{0x04}, 12)
	want := "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659"

	var m Memory
	for run := range 2 { // the second on the memory the first left
		got := hex.EncodeToString(deriveKey(&m, argon2id, password, salt, secret, data, 3, 32, 4, 32))
		if got != want {
			t.Fatalf("run %d: tag = %s, want %s", run, got, want)
		}
	}
}

// matchesUpstream computes in m, after filling its blocks with noise as a
// computation with other inputs would leave them, and compares the key
// with upstream's.
func matchesUpstream(t *testing.T, m *Memory, r *rand.Rand, password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) {
	t.Helper()
	want := upstream.IDKey(password, salt, time, memory, threads, keyLen)
	full := m.blocks[:cap(m.blocks)]
	for i := range full {
		for j := range full[i] {
			full[i][j] = r.Uint64()
		}
	}
	if got := m.IDKey(password, salt, time, memory, threads, keyLen); !bytes.Equal(got, want) {
		t.Fatalf("IDKey(t=%d, m=%d, p=%d, len=%d) = %x, upstream %x", time, memory, threads, keyLen, got, want)
	}
}

// TestIDKeyMatchesUpstream: the same key as golang.org/x/crypto/argon2 for
// every mix of passes, memory (rounded or not, growing and shrinking),
// lanes and key length, with one Memory reused dirty throughout.
func TestIDKeyMatchesUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m Memory
	for _, time := range []uint32{1, 2, 3} {
		for _, memory := range []uint32{1, 8, 37, 64, 256, 19, 1024, 100} {
			for _, threads := range []uint8{1, 2, 3, 4} {
				for _, keyLen := range []uint32{1, 16, 32, 64, 65, 128} {
					password := make([]byte, r.IntN(40))
					salt := make([]byte, 8+r.IntN(24))
					for _, b := range [][]byte{password, salt} {
						for i := range b {
							b[i] = byte(r.Uint32())
						}
					}
					matchesUpstream(t, &m, r, password, salt, time, memory, threads, keyLen)
				}
			}
		}
	}
}

// TestIDKeyMatchesUpstreamAtServingParams: the parameters the issuer
// hashes with (OWASP's 19 MiB, two passes), on one lane and on four, in a
// memory kept from a computation with other inputs.
func TestIDKeyMatchesUpstreamAtServingParams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var m Memory
	for _, threads := range []uint8{1, 4, 1} {
		matchesUpstream(t, &m, r, []byte("correct horse battery staple"), []byte("0123456789abcdef"), 2, 19*1024, threads, 32)
	}
}

// FuzzIDKeyMatchesUpstream: any inputs, small costs, reused dirty memory.
func FuzzIDKeyMatchesUpstream(f *testing.F) {
	f.Add([]byte("correct horse"), []byte("saltsaltsalt"), uint8(2), uint16(64), uint8(1), uint8(32))
	f.Add([]byte{}, []byte{0}, uint8(1), uint16(9), uint8(4), uint8(1))
	var m Memory
	r := rand.New(rand.NewPCG(3, 4))
	f.Fuzz(func(t *testing.T, password, salt []byte, time uint8, memory uint16, threads uint8, keyLen uint8) {
		matchesUpstream(t, &m, r, password, salt, uint32(time%3)+1, uint32(memory%512), threads%4+1, uint32(keyLen%128)+1)
	})
}

// TestMemoryIsReused: a Memory grows to the largest computation it served
// and later ones allocate none of their blocks, where upstream allocates
// the whole memory parameter every time.
func TestMemoryIsReused(t *testing.T) {
	const kib = 4096
	var m Memory
	m.IDKey([]byte("pw"), []byte("saltsalt"), 1, kib, 1, 32)
	if got := m.Size(); got != kib*1024 {
		t.Fatalf("Size after a %d KiB computation = %d, want %d", kib, got, kib*1024)
	}
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	const runs = 4
	ours := allocated(func() {
		for range runs {
			m.IDKey([]byte("pw"), []byte("saltsalt"), 1, kib/2, 1, 32)
		}
	})
	theirs := allocated(func() {
		for range runs {
			upstream.IDKey([]byte("pw"), []byte("saltsalt"), 1, kib/2, 1, 32)
		}
	})
	if ours >= kib*1024/8 {
		t.Errorf("%d computations in a reused Memory allocated %d bytes, want under %d", runs, ours, kib*1024/8)
	}
	if theirs < runs*kib*1024/2 {
		t.Errorf("upstream allocated %d bytes for %d computations of %d KiB: the comparison no longer shows what reuse saves", theirs, runs, kib/2)
	}
	if got := m.Size(); got != kib*1024 {
		t.Errorf("Size after smaller computations = %d, want %d kept", got, kib*1024)
	}
}

// TestGenericBlockMatches: the portable block function, which machines
// without the assembly use, computes what processBlock and processBlockXOR
// compute here.
func TestGenericBlockMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var in1, in2, prior block
	for range 50 {
		for _, b := range []*block{&in1, &in2, &prior} {
			for i := range b {
				b[i] = r.Uint64()
			}
		}
		for _, xor := range []bool{false, true} {
			want, got := prior, prior
			if xor {
				processBlockXOR(&want, &in1, &in2)
			} else {
				processBlock(&want, &in1, &in2)
			}
			processBlockGeneric(&got, &in1, &in2, xor)
			if got != want {
				t.Fatalf("processBlockGeneric(xor=%v) differs from processBlock", xor)
			}
		}
	}
}

// BenchmarkIDKey compares a computation in reused memory with upstream's,
// which allocates (and has the collector reclaim) the memory parameter each
// time, at OWASP's parameters and one goroutine per CPU.
func BenchmarkIDKey(b *testing.B) {
	const time, memory, threads, keyLen = 2, 19 * 1024, 1, 32
	salt := []byte("0123456789abcdef")
	b.Run("upstream", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				upstream.IDKey([]byte("pw"), salt, time, memory, threads, keyLen)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("reused", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var m Memory
			for pb.Next() {
				m.IDKey([]byte("pw"), salt, time, memory, threads, keyLen)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}
