package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// The verifier's memory defaults apply unless the environment sets its
// own, and an empty variable sets nothing: the runtime reads an empty
// GOMEMLIMIT as no limit, and the verifier used to take its mere presence
// for the operator's choice.
func TestMemoryDefaults(t *testing.T) {
	limit, gc := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(limit); debug.SetGCPercent(gc) })
	for _, tc := range []struct {
		name         string
		env          map[string]string
		limit, gcPct int64
	}{
		{"nothing set", nil, defaultMemoryLimit, defaultGCPercent},
		{"empty values", map[string]string{"GOMEMLIMIT": "", "GOGC": ""}, defaultMemoryLimit, defaultGCPercent},
		{"the operator's own", map[string]string{"GOMEMLIMIT": "64MiB", "GOGC": "150"}, math.MaxInt64, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime would have applied from a set variable is
			// not redone here: it stands as the test left it.
			debug.SetMemoryLimit(math.MaxInt64)
			debug.SetGCPercent(100)
			setMemoryLimit(func(k string) string { return tc.env[k] })
			if got := debug.SetMemoryLimit(-1); got != tc.limit {
				t.Errorf("memory limit = %d, want %d", got, tc.limit)
			}
			if got := int64(debug.SetGCPercent(100)); got != tc.gcPct {
				t.Errorf("GOGC = %d, want %d", got, tc.gcPct)
			}
		})
	}
}
