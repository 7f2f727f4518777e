package main

import "runtime/debug"

// defaultMemoryLimit is the verifier's soft memory limit unless GOMEMLIMIT
// says otherwise. A sidecar runs beside every app, so its footprint is
// multiplied: under load the garbage collector, left to GOGC alone, let
// the heap grow past what the live data needs and pushed the peak RSS
// over 25 MiB. Raise it with GOMEMLIMIT for a --cache-size much larger
// than the default.
const defaultMemoryLimit = 20 << 20

// defaultGCPercent is the verifier's GOGC unless the environment sets
// one. Its live heap is a few MiB (the token cache, the connections'
// buffers), so at the runtime's 100 it collected every few thousand
// requests; at 200 it collects half as often, and the memory limit above,
// not GOGC, is what bounds the heap under load. Measured with make
// bench-proxy on 2 cores: about a tenth less CPU per request, peak RSS
// still under 25 MiB.
const defaultGCPercent = 200

// setMemoryLimit applies defaultMemoryLimit and defaultGCPercent unless
// GOMEMLIMIT or GOGC is set, in which case the runtime has already
// applied that. Set means not empty, as the runtime reads them: an empty
// GOMEMLIMIT (a compose file's ${GOMEMLIMIT} left unset) is no limit to
// the runtime, and would have left the verifier with none.
func setMemoryLimit(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
