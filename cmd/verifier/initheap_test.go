package main

import (
	"runtime"
	"testing"
)

// maxInitHeap bounds the heap the verifier's packages keep from their
// initialisation, before it serves anything: 0.3 MiB now. Its soft memory
// limit (defaultMemoryLimit) is 20 MiB, all of which belongs to the
// requests and the token cache.
const maxInitHeap = 2 << 20

// TestInitHeap: a package linked in by accident can cost the verifier its
// memory target without a line of its code running. The password
// package's strength dictionaries, brought in through the configuration it
// shares with the issuer, kept 6.8 MB live from the start and took the
// peak RSS under load from 24.4 to 29.9 MiB. The test binary links this
// package's imports and the testing package, as the verifier links them.
func TestInitHeap(t *testing.T) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapAlloc > maxInitHeap {
		t.Errorf("%d bytes live after the packages' initialisation, want at most %d: go list -deps ./cmd/verifier shows what is linked", m.HeapAlloc, maxInitHeap)
	}
}
