package main

import (
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the verifier's soft memory limit unless GOMEMLIMIT
// says otherwise. A sidecar runs beside every app, so its footprint is
// multiplied: under load the garbage collector, left to GOGC alone, let
// the heap grow past what the live data needs and pushed the peak RSS
// over 25 MiB. Raise it with GOMEMLIMIT for a --cache-size much larger
// than the default.
const defaultMemoryLimit = 20 << 20

// setMemoryLimit applies defaultMemoryLimit unless GOMEMLIMIT is set, in
// which case the runtime has already applied that.
func setMemoryLimit() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
