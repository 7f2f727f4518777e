package httpserver

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeRecorder remembers each Write it is given, as one system call on a
// real file would be.
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeRecorder) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func TestLogWriterBatchesUntilFlush(t *testing.T) {
	sink := &writeRecorder{}
	lw := NewLogWriter(sink, time.Hour)
	defer lw.Close()
	var want strings.Builder
	for i := range 100 {
		line := fmt.Sprintf("{\"n\":%d}\n", i)
		want.WriteString(line)
		if n, err := lw.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", line, n, err, len(line))
		}
	}
	if got := sink.snapshot(); len(got) != 0 {
		t.Fatalf("before Flush the sink got %d writes, want 0", len(got))
	}
	if err := lw.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := sink.snapshot(); len(got) != 1 || got[0] != want.String() {
		t.Fatalf("after Flush the sink got %d writes (%q), want the 100 lines in one", len(got), got)
	}
}

func TestLogWriterFlushesOnItsInterval(t *testing.T) {
	sink := &writeRecorder{}
	lw := NewLogWriter(sink, 10*time.Millisecond)
	defer lw.Close()
	lw.Write([]byte("line\n"))
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.snapshot()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a queued line was not written within 10s of a 10ms flush interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := sink.snapshot(); got[0] != "line\n" {
		t.Fatalf("sink got %q, want %q", got, "line\n")
	}
}

// Concurrent writers, a full buffer and Close: every line arrives once,
// whole, and every write the sink sees ends on a line boundary.
func TestLogWriterConcurrentWritersLoseNothing(t *testing.T) {
	sink := &writeRecorder{}
	lw := NewLogWriter(sink, time.Millisecond)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				// Lengths vary so the buffer fills at odd places.
				lw.Write([]byte(fmt.Sprintf("w%d-%d %s\n", w, i, strings.Repeat("x", i%97))))
			}
		})
	}
	wg.Wait()
	// One line larger than the whole buffer goes through on its own.
	big := strings.Repeat("y", logBufferSize+1) + "\n"
	lw.Write([]byte(big))
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	lw.Write([]byte("after close\n"))

	var all bytes.Buffer
	for _, wr := range sink.snapshot() {
		if !strings.HasSuffix(wr, "\n") {
			t.Fatalf("sink got a write that splits a line: ...%q", wr[max(0, len(wr)-40):])
		}
		all.WriteString(wr)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n") {
		seen[l]++
	}
	for w := range writers {
		for i := range lines {
			l := fmt.Sprintf("w%d-%d %s", w, i, strings.Repeat("x", i%97))
			if seen[l] != 1 {
				t.Fatalf("line %q arrived %d times, want 1", l[:min(len(l), 20)], seen[l])
			}
		}
	}
	if seen[strings.TrimSuffix(big, "\n")] != 1 || seen["after close"] != 1 {
		t.Fatalf("the oversized line or the line after Close did not arrive exactly once")
	}
	if len(seen) != writers*lines+2 {
		t.Fatalf("sink got %d distinct lines, want %d", len(seen), writers*lines+2)
	}
}
