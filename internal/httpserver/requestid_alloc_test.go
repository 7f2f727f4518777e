//go:build !race

// The race detector's instrumentation moves values to the heap, so
// allocations are counted only without it.

package httpserver

import "testing"

// A fresh id costs one allocation, its string: it is made for every
// request that arrives without one.
func TestNewRequestIDAllocatesOnlyItsString(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = newRequestID() }); n != 1 {
		t.Errorf("newRequestID allocates %v times, want 1", n)
	}
	a, b := newRequestID(), newRequestID()
	if a == b {
		t.Errorf("newRequestID() twice = %q both times, want distinct ids", a)
	}
}
