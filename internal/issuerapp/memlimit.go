package issuerapp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/palisade-auth/palisade/internal/memlimit"
	"github.com/palisade-auth/palisade/internal/password"
)

// memoryBase is what the issuer needs besides password hashing under a
// flood: the runtime and the heap at rest (about 7 MiB, 6 of them the
// strength estimator's dictionaries), and 500 clients' connections and
// queued requests (about 16 MiB of heap and 5-10 MiB of goroutine
// stacks). The executable's own pages (about 24 MiB resident) are outside
// the Go runtime and outside the limit. Measured with a 500-client flood
// on 2 slots of 19 MiB (make bench-issuer-memory and loginflood in
// alternating rounds): with 31 MiB the peak was 93.2-94.0 MiB resident,
// at the logins/s and CPU per login of 34 MiB with the common-password
// list held as a 3 MiB map (95.4-97.8 MiB); with 28 MiB when that map
// was held (GOMEMLIMIT=66MiB) the heap sat at the limit and the collector
// ran without pause, at half the logins per second.
const memoryBase = 31 << 20

// measuredClients is the flood memoryBase was measured under: a
// --hash-queue above it lets more requests wait than the base holds.
const measuredClients = 500

// perConn is what each connection beyond measuredClients adds to the
// limit: the base's share per client (24 MiB for 500). An idle keep-alive
// connection holds about 12 KB of live heap and stack, a request in flight
// more; the rest is room for garbage, without which the collector runs
// without pause. With the limit fixed at 72 MiB, 2,000 keep-alive
// connections polling the key set (as sidecars do) took the live heap to
// 66 MiB while logins went on, and logins fell to 0.64x those with no
// limit, 870 collections in 28 s.
const perConn = 48 << 10

// clientLoad is what the issuer's clients make it hold now.
type clientLoad struct {
	Conns     int64 // connections open
	BodyBytes int64 // request bodies held in memory (issuerapi.API.HeldBodyBytes)
}

// memoryLimit returns the soft memory limit of an issuer running at most
// slots argon2 computations of perHash bytes each, with at most queue
// requests waiting for a slot, under load:
//
//	slots × perHash + memoryBase + perConn × (conns - measuredClients, if more) + body bytes
//
// Request bodies count in full: 500 clients sending 64 KiB bodies slowly
// hold 32 MiB, which the base, measured with login bodies of 100 bytes,
// has no room for.
//
// Each slot keeps its argon2 memory from one computation to the next
// (password.Hasher), so hashing holds slots × perHash however many
// computations run and leaves no garbage behind. When every computation
// allocated its own, the dead hashes piled up under GOGC to twice the live
// heap (a 500-client flood took the issuer to 160-190 MiB), and bounding
// them took a collection after every hash: a fifth of the issuer's CPU
// under a flood. The limit bounds what remains: connections and requests,
// which GOGC alone would let double over the slots' memory.
//
// The limit is memlimit.None when queue is 0, waiting without bound, or
// above measuredClients: every waiting request holds its connection,
// stack and body, so the heap follows the number of clients and no figure
// derived from the pool bounds it; under a limit it would only reach, the
// collector ran without pause (500 clients queued: 46.9 logins/s under 72
// MiB against 67.6 with no limit). Source says why, for the log.
func memoryLimit(slots int, perHash int64, queue int, load clientLoad) memlimit.Choice {
	switch {
	case queue == 0:
		return memlimit.Choice{Limit: memlimit.None, Source: "none derived: --hash-queue 0 waits without bound; set GOMEMLIMIT"}
	case queue > measuredClients:
		return memlimit.Choice{Limit: memlimit.None, Source: fmt.Sprintf("none derived: --hash-queue %d lets more requests wait than the %d it was measured with; set GOMEMLIMIT", queue, measuredClients)}
	}
	limit := int64(slots)*perHash + memoryBase + perConn*max(0, load.Conns-measuredClients) + max(0, load.BodyBytes)
	return memlimit.Choice{Limit: limit, Source: fmt.Sprintf("derived: --hash-concurrency × argon2 memory + %d MiB, + %d KiB a connection past %d, + the request bodies held", memoryBase>>20, perConn>>10, measuredClients)}
}

// startMemoryControl sets the soft memory limit for h, with at most queue
// requests waiting for it (0: without bound) and load what the clients
// make the issuer hold; then every second until ctx ends it follows load
// with the limit, and returns h's burst memory to the system when hashing
// has gone quiet.
func startMemoryControl(ctx context.Context, log *slog.Logger, h *password.Hasher, queue int, load func() clientLoad) {
	tick := memoryControl(log, h, queue, load, func() { releaseBurst(h) })
	go every(ctx, time.Second, tick)
}

// memoryControl sets the soft memory limit for h as startMemoryControl
// does, and returns what it does every second: set the limit again for
// the load now, and release when hashing has gone quiet.
func memoryControl(log *slog.Logger, h *password.Hasher, queue int, load func() clientLoad, release func()) (tick func()) {
	limits := memlimit.NewSetter(log, os.Getenv)
	own := func() memlimit.Choice { return memoryLimit(h.Slots(), h.HashMemory(), queue, load()) }
	memlimit.Log(log, limits.Set(own()))
	returner := &memoryReturner{hashes: h, release: release}
	return func() {
		limits.Set(own())
		returner.tick()
	}
}

// every calls fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// releaseBurst returns to the system what a burst of logins left behind:
// the slots' argon2 memory and whatever the burst's requests no longer
// use.
func releaseBurst(h *password.Hasher) {
	h.ReleaseMemory()
	// sync.Pool keeps what it held for one collection more, and net/http
	// pools the readers and writers of every connection the burst closed
	// (4 MiB after 500 clients): a first collection moves them aside, the
	// second, FreeOSMemory's own, frees them.
	runtime.GC()
	debug.FreeOSMemory()
}

// hashActivity is what memoryReturner watches of a *password.Hasher.
type hashActivity interface {
	Computed() uint64
	Running() int
	Waiting() int64
}

// memoryReturner gives the memory of a burst of password hashing back to
// the system once hashing has gone quiet: the slots' argon2 memory
// (password.Hasher.ReleaseMemory) and the burst's connections and
// requests, which the collector would otherwise leave resident until
// something allocates, or the runtime's forced collection two minutes
// later. Under steady hashing it does nothing: the slots reuse their
// memory and the memory limit bounds the rest.
type memoryReturner struct {
	hashes  hashActivity
	release func() // ReleaseMemory and debug.FreeOSMemory, but for tests
	seen    uint64 // Computed at the last tick
	dirty   bool   // hashes ran since the last release
}

// tick releases when hashes ran since the last release, none has started
// since the previous tick, and none is running or waiting now: once per
// quiet spell, never while hashing goes on. A computation is counted when
// it starts, so the idle check is what keeps a release from running before
// the last computation has put its memory back to be dropped.
func (m *memoryReturner) tick() {
	n := m.hashes.Computed()
	if n != m.seen {
		m.seen, m.dirty = n, true
		return
	}
	if m.dirty && m.hashes.Running() == 0 && m.hashes.Waiting() == 0 {
		m.dirty = false
		m.release()
	}
}
