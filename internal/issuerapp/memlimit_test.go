package issuerapp

import (
	"crypto/rand"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/palisade-auth/palisade/internal/memlimit"
	"github.com/palisade-auth/palisade/internal/password"
)

func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name      string
		slots     int
		perHash   int64
		queue     int
		conns     int64
		bodies    int64
		wantLimit int64
		wantWhy   string
	}{
		{"two slots of 19 MiB", 2, 19 * mib, 64, 0, 0, 2*19*mib + 31*mib, "derived"},
		{"eight slots", 8, 19 * mib, 64, 0, 0, 8*19*mib + 31*mib, "derived"},
		{"a queue of one", 2, 19 * mib, 1, 0, 0, 2*19*mib + 31*mib, "derived"},
		{"a queue without bound", 2, 19 * mib, 0, 0, 0, memlimit.None, "--hash-queue 0"},
		{"the longest queue the base was measured with", 2, 19 * mib, 500, 0, 0, 2*19*mib + 31*mib, "derived"},
		{"a queue longer than that", 2, 19 * mib, 501, 0, 0, memlimit.None, "--hash-queue 501"},
		{"as many connections as the base was measured with", 2, 19 * mib, 64, 500, 0, 2*19*mib + 31*mib, "derived"},
		{"2,000 connections", 2, 19 * mib, 64, 2000, 0, 2*19*mib + 31*mib + 1500*48<<10, "derived"},
		{"2,000 connections, a queue without bound", 2, 19 * mib, 0, 2000, 0, memlimit.None, "--hash-queue 0"},
		{"500 clients holding 64 KiB bodies", 2, 19 * mib, 64, 500, 500 * 64 << 10, 2*19*mib + 31*mib + 500*64<<10, "request bodies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := memoryLimit(tt.slots, tt.perHash, tt.queue, clientLoad{Conns: tt.conns, BodyBytes: tt.bodies})
			if c.Limit != tt.wantLimit || !strings.Contains(c.Source, tt.wantWhy) {
				t.Errorf("memoryLimit(%d, %d, queue %d, %d connections, %d body bytes) = %d (%s), want %d (%s)",
					tt.slots, tt.perHash, tt.queue, tt.conns, tt.bodies, c.Limit, c.Source, tt.wantLimit, tt.wantWhy)
			}
		})
	}
}

// The limit follows the connections and request bodies the issuer holds,
// tick by tick.
func TestMemoryControlFollowsConnections(t *testing.T) {
	if _, ok, err := memlimit.Container(); err != nil || ok {
		t.Skipf("SKIPPED: this test process runs under a container memory limit (%v), which would lower the limit under test", err)
	}
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	h := password.NewHasher(password.DefaultParams, 2, rand.Reader)
	var conns, bodies atomic.Int64
	load := func() clientLoad { return clientLoad{Conns: conns.Load(), BodyBytes: bodies.Load()} }
	tick := memoryControl(slog.New(slog.DiscardHandler), h, 64, load, func() {})
	base := 2*h.HashMemory() + memoryBase
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Fatalf("limit at start = %d, want %d", got, base)
	}
	for _, l := range []clientLoad{{2000, 0}, {700, 0}, {0, 0}, {300, 300 * 60000}, {300, 0}} {
		conns.Store(l.Conns)
		bodies.Store(l.BodyBytes)
		tick()
		if got, want := debug.SetMemoryLimit(-1), base+perConn*max(0, l.Conns-measuredClients)+l.BodyBytes; got != want {
			t.Fatalf("with %d connections and %d body bytes the limit is %d after a tick, want %d", l.Conns, l.BodyBytes, got, want)
		}
	}
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
