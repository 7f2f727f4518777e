package issuerapp

import (
	"bytes"
	"crypto/rand"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/palisade-auth/palisade/internal/password"
)

func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMEMLIMIT" {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name      string
		slots     int
		perHash   int64
		queue     int
		gomemlim  string
		wantLimit int64
		wantOK    bool
	}{
		{"two slots of 19 MiB", 2, 19 * mib, 64, "", 2*19*mib + 34*mib, true},
		{"eight slots", 8, 19 * mib, 64, "", 8*19*mib + 34*mib, true},
		{"a queue of one", 2, 19 * mib, 1, "", 2*19*mib + 34*mib, true},
		{"a queue without bound", 2, 19 * mib, 0, "", 0, false},
		{"the longest queue the base was measured with", 2, 19 * mib, 500, "", 2*19*mib + 34*mib, true},
		{"a queue longer than that", 2, 19 * mib, 501, "", 0, false},
		{"operator's limit", 2, 19 * mib, 64, "200MiB", 0, false},
		{"operator turned it off", 2, 19 * mib, 64, "off", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit, _, ok := memoryLimit(tt.slots, tt.perHash, tt.queue, env(tt.gomemlim))
			if limit != tt.wantLimit || ok != tt.wantOK {
				t.Errorf("memoryLimit(%d, %d, queue %d, GOMEMLIMIT=%q) = %d, %v, want %d, %v",
					tt.slots, tt.perHash, tt.queue, tt.gomemlim, limit, ok, tt.wantLimit, tt.wantOK)
			}
		})
	}
}

// TestSetMemoryLimit applies the limit to this test process's runtime, and
// puts the limit it found back.
func TestSetMemoryLimit(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Run("derived", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		setMemoryLimit(log, 2, 1<<20, 64)
		if got, want := debug.SetMemoryLimit(-1), int64(2<<20+memoryBase); got != want {
			t.Errorf("limit after setMemoryLimit(2 slots of 1 MiB) = %d, want %d", got, want)
		}
	})
	t.Run("GOMEMLIMIT set", func(t *testing.T) {
		const operators = 123 << 20 // what the runtime read from GOMEMLIMIT at start
		t.Setenv("GOMEMLIMIT", "123MiB")
		debug.SetMemoryLimit(operators)
		setMemoryLimit(log, 2, 1<<20, 64)
		if got := debug.SetMemoryLimit(-1); got != operators {
			t.Errorf("limit after setMemoryLimit with GOMEMLIMIT set = %d, want it untouched at %d", got, operators)
		}
	})
	t.Run("queue without bound", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		const runtimes = 321 << 20 // whatever the runtime had
		debug.SetMemoryLimit(runtimes)
		var out bytes.Buffer
		setMemoryLimit(slog.New(slog.NewTextHandler(&out, nil)), 2, 1<<20, 0)
		if got := debug.SetMemoryLimit(-1); got != runtimes {
			t.Errorf("limit after setMemoryLimit with --hash-queue 0 = %d, want it untouched at %d", got, runtimes)
		}
		if !strings.Contains(out.String(), "--hash-queue 0") {
			t.Errorf("log %q does not say why no limit was derived", out.String())
		}
	})
}

type fakeHashes struct {
	computed uint64
	running  int
	waiting  int64
}

func (f *fakeHashes) Computed() uint64 { return f.computed }
func (f *fakeHashes) Running() int     { return f.running }
func (f *fakeHashes) Waiting() int64   { return f.waiting }

// TestMemoryReturner drives the returner tick by tick: it releases once
// after a burst, only when no hash has started for a whole tick and none
// runs or waits, and never during steady hashing.
func TestMemoryReturner(t *testing.T) {
	h := &fakeHashes{}
	releases := 0
	m := &memoryReturner{hashes: h, release: func() { releases++ }}
	steps := []struct {
		name             string
		computed         uint64
		running          int
		waiting          int64
		wantReleasesThen int
	}{
		{"idle at start", 0, 0, 0, 0},
		{"still idle", 0, 0, 0, 0},
		{"burst starts", 3, 2, 40, 0},
		{"burst goes on", 9, 2, 40, 0},
		{"no new start but the queue waits", 9, 2, 40, 0},
		{"last hash still running", 9, 1, 0, 0},
		{"quiet", 9, 0, 0, 1},
		{"still quiet: no second release", 9, 0, 0, 1},
		{"one login", 10, 0, 0, 1},
		{"quiet after it", 10, 0, 0, 2},
		{"steady hashing", 11, 1, 0, 2},
		{"steady hashing", 12, 1, 0, 2},
		{"steady hashing", 13, 0, 0, 2},
	}
	for i, s := range steps {
		h.computed, h.running, h.waiting = s.computed, s.running, s.waiting
		m.tick()
		if releases != s.wantReleasesThen {
			t.Fatalf("tick %d (%s): releases = %d, want %d", i, s.name, releases, s.wantReleasesThen)
		}
	}
}

// TestReleaseBurstFreesPooled: what a burst left in a sync.Pool (net/http
// keeps its connections' readers and writers there) is freed by one
// release, though a pool survives one collection.
func TestReleaseBurstFreesPooled(t *testing.T) {
	var pool sync.Pool
	buf := new([1 << 20]byte)
	gone := weak.Make(buf)
	pool.Put(buf)
	releaseBurst(password.NewHasher(password.DefaultParams, 1, rand.Reader))
	if gone.Value() != nil {
		t.Error("a buffer left in a sync.Pool is still live after releaseBurst")
	}
	runtime.KeepAlive(&pool)
}
