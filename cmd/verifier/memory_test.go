package main

import (
	"runtime/debug"
	"testing"
)

// The verifier's GOGC applies unless the environment sets its own, and an
// empty variable sets nothing: the runtime reads an empty GOGC as unset,
// and the verifier used to take its mere presence for the operator's
// choice.
func TestGCPercentDefault(t *testing.T) {
	gc := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"nothing set", nil, defaultGCPercent},
		{"empty", map[string]string{"GOGC": ""}, defaultGCPercent},
		{"the operator's own", map[string]string{"GOGC": "150"}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime would have applied from a set variable is
			// not redone here: it stands as the test left it.
			debug.SetGCPercent(100)
			setGCPercent(func(k string) string { return tc.env[k] })
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GOGC = %d, want %d", got, tc.want)
			}
		})
	}
}
