package main

import (
	"runtime/debug"

	"github.com/palisade-auth/palisade/internal/memlimit"
)

// ownMemoryLimit is the verifier's own soft memory limit: none, so that
// only GOMEMLIMIT or the container's limit (memlimit.Apply) sets one. Its
// live heap follows its connections, about 22 KB each over HTTP/1.1 (the
// server's and the upstream's buffers) and more with HTTP/2 streams, so
// any fixed limit is one the load can reach, and there the collector runs
// without pause. The 20 MiB it had did nothing at 64 connections (peak RSS
// under wrk 23.9-24.2 MiB with it, 24.1-24.5 without) and at 500 cut the
// requests per second to a third (7,170 against 25,652), at 2,000 to 0.46x
// the bare proxy.
var ownMemoryLimit = memlimit.Choice{Limit: memlimit.None, Source: "none of the verifier's own: its heap follows its connections"}

// defaultGCPercent is the verifier's GOGC unless the environment sets
// one. Its live heap at rest is a few MiB (the token cache, the
// connections' buffers), under the runtime's 4 MiB floor for a heap goal,
// so at the runtime's 100 it collected every few thousand requests; at 200
// it collects half as often. make bench-proxy on 2 cores at 64
// connections: 40-41 us CPU per request against 48.6 at 100, peak RSS
// 24.1-24.5 MiB against 21.6; at 2,000 connections the heap is twice the
// live data instead of once (peak RSS 218 MiB against 167).
const defaultGCPercent = 200

// setGCPercent applies defaultGCPercent unless GOGC is set, in which case
// the runtime has already applied it. Set means not empty, as the runtime
// reads it: an empty GOGC (a compose file's ${GOGC} left unset) is unset.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
