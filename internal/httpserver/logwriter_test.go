package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	defer lw.Close(context.Background())
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
	if err := lw.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sink.snapshot(); len(got) != 1 || got[0] != want.String() {
		t.Fatalf("after Flush the sink got %d writes (%q), want the 100 lines in one", len(got), got)
	}
}

func TestLogWriterFlushesOnItsInterval(t *testing.T) {
	sink := &writeRecorder{}
	lw := NewLogWriter(sink, 10*time.Millisecond)
	defer lw.Close(context.Background())
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
	// One line larger than the early-write size goes through whole.
	big := strings.Repeat("y", logBufferSize+1) + "\n"
	lw.Write([]byte(big))
	if err := lw.Close(context.Background()); err != nil {
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

// blockingSink takes nothing until release is closed, as a pipe nobody
// reads does once it is full.
type blockingSink struct {
	writeRecorder
	entered chan struct{} // receives when a Write starts, while it has room
	release chan struct{}
}

func newBlockingSink(t *testing.T) *blockingSink {
	s := &blockingSink{entered: make(chan struct{}, 1024), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	return s
}

func (s *blockingSink) Write(p []byte) (int, error) {
	select {
	case s.entered <- struct{}{}:
	default: // a batch is many writes (pipeAtomic); the tests wait for the first
	}
	<-s.release
	return s.writeRecorder.Write(p)
}

// returnsWithin fails the test when f has not returned within 10 s: a
// write that waits for a stuck output never would.
func returnsWithin(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return in 10s: it waits for the stuck output", what)
	}
}

// An output that takes nothing never holds a Write: past the queue's
// bound lines are dropped and counted, and once the output takes lines
// again the count arrives as a WARN line after the lines that were kept.
func TestLogWriterStuckOutputDropsInsteadOfWaiting(t *testing.T) {
	sink := newBlockingSink(t)
	lw := NewLogWriter(sink, time.Hour)
	first := strings.Repeat("a", logBufferSize) + "\n"
	lw.Write([]byte(first)) // past the early-write size: the flusher takes it and is held
	<-sink.entered

	line := strings.Repeat("b", 999) + "\n"
	var kept, dropped int
	returnsWithin(t, "Write", func() {
		for range 2 * logQueueLimit / len(line) {
			switch _, err := lw.Write([]byte(line)); {
			case err == nil:
				kept++
			case errors.Is(err, ErrLogDropped):
				dropped++
			default:
				t.Errorf("Write = %v, want nil or ErrLogDropped", err)
			}
		}
	})
	if want := logQueueLimit / len(line); kept != want || dropped == 0 {
		t.Fatalf("with the output stuck %d lines were kept and %d dropped, want %d kept (4 MiB) and the rest dropped", kept, dropped, want)
	}
	if got := lw.Dropped(); got != uint64(dropped) {
		t.Errorf("Dropped() = %d, want %d", got, dropped)
	}

	close(sink.release)
	if err := lw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(sink.snapshot(), "")
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	if len(lines) != 1+kept+1 || lines[0]+"\n" != first || strings.Count(all, line) != kept {
		t.Fatalf("the output got %d lines, want the first, the %d kept and the report", len(lines), kept)
	}
	var report struct {
		Level, Msg string
		Lines      int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &report); err != nil || report.Level != "WARN" || report.Msg != "log lines dropped" || report.Lines != dropped {
		t.Fatalf("last line %q (%v), want a WARN \"log lines dropped\" with lines=%d", lines[len(lines)-1], err, dropped)
	}
}

// A shutdown does not wait on a stuck output past its context: Close gives
// up, and a line logged after it is dropped rather than held.
func TestLogWriterCloseGivesUpOnAStuckOutput(t *testing.T) {
	sink := newBlockingSink(t)
	lw := NewLogWriter(sink, time.Hour)
	lw.Write([]byte("queued\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	returnsWithin(t, "Close", func() { err = lw.Close(ctx) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with the output stuck = %v, want the context's deadline", err)
	}
	returnsWithin(t, "Write after Close", func() {
		if _, err := lw.Write([]byte("late\n")); !errors.Is(err, ErrLogDropped) {
			t.Errorf("Write after a Close that gave up = %v, want ErrLogDropped", err)
		}
	})
}

// failingSink fails its first write, as a closed pipe does, and takes
// the rest.
type failingSink struct {
	writeRecorder
	failed bool
}

func (s *failingSink) Write(p []byte) (int, error) {
	if !s.failed {
		s.failed = true
		return 0, errors.New("broken pipe")
	}
	return s.writeRecorder.Write(p)
}

// Lines the output failed are counted, Flush returns the output's error,
// and the next write reports them.
func TestLogWriterCountsLinesTheOutputFailed(t *testing.T) {
	sink := &failingSink{}
	lw := NewLogWriter(sink, time.Hour)
	lw.Write([]byte("one\ntwo\n"))
	lw.Write([]byte("three\n"))
	if err := lw.Flush(context.Background()); err == nil || err.Error() != "broken pipe" {
		t.Fatalf("Flush with the output failing = %v, want its error", err)
	}
	if got := lw.Dropped(); got != 3 {
		t.Fatalf("Dropped() = %d, want 3", got)
	}
	lw.Write([]byte("four\n"))
	if err := lw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.snapshot()
	if len(got) != 1 || !strings.HasPrefix(got[0], "four\n{") || !strings.Contains(got[0], `"lines":3`) {
		t.Fatalf("after the failure the output got %q, want four and a report of 3 lines", got)
	}
}

// shortSink takes only the first take bytes of its first write and fails
// it, as a disk that fills mid-line does, and takes the rest.
type shortSink struct {
	writeRecorder
	take   int
	failed bool
}

func (s *shortSink) Write(p []byte) (int, error) {
	if !s.failed {
		s.failed = true
		s.writeRecorder.Write(p[:s.take])
		return s.take, errors.New("no space left on device")
	}
	return s.writeRecorder.Write(p)
}

// A write that broke off mid-line leaves half a line in the output: the
// next write ends it before its own lines, instead of gluing the next line
// to it, and only the lines not wholly written count as dropped.
func TestLogWriterEndsTheHalfLineAFailureLeft(t *testing.T) {
	sink := &shortSink{take: len("one\ntw")}
	lw := NewLogWriter(sink, time.Hour)
	lw.Write([]byte("one\ntwo\nthree\n"))
	if err := lw.Flush(context.Background()); err == nil {
		t.Fatal("Flush with the output failing mid-line = nil, want its error")
	}
	if got := lw.Dropped(); got != 2 {
		t.Fatalf("Dropped() = %d, want 2 (two and three; one was written)", got)
	}
	lw.Write([]byte("four\n"))
	if err := lw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(sink.snapshot(), "")
	if !strings.HasPrefix(out, "one\ntw\nfour\n{") || !strings.Contains(out, `"lines":2`) || !strings.Contains(out, `"reason":"the log output failed them","err":"no space left on device"`) || !strings.HasSuffix(out, "}\n") {
		t.Fatalf("the output got %q, want one, the half line ended, four, and a report of 2 lines the output failed", out)
	}
}

// A batch goes out in writes of whole lines, none over pipeAtomic but a
// single line longer than that, so two processes sharing a pipe never
// interleave mid-line.
func TestLogWriterWritesAtMostAPipeBufferOfLines(t *testing.T) {
	sink := &writeRecorder{}
	lw := NewLogWriter(sink, time.Hour)
	var want strings.Builder
	for i := range 200 {
		line := fmt.Sprintf("%03d %s\n", i, strings.Repeat("x", 90+i))
		if i == 100 {
			line = strings.Repeat("y", 3*pipeAtomic) + "\n"
		}
		want.WriteString(line)
		lw.Write([]byte(line))
	}
	if err := lw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	writes := sink.snapshot()
	for i, w := range writes {
		if !strings.HasSuffix(w, "\n") || len(w) > pipeAtomic && strings.Count(w, "\n") != 1 {
			t.Fatalf("write %d of %d is %d bytes, %d lines: want whole lines, at most %d bytes or one line", i, len(writes), len(w), strings.Count(w, "\n"), pipeAtomic)
		}
	}
	if got := strings.Join(writes, ""); got != want.String() {
		t.Fatalf("the output differs from the lines written (%d bytes, want %d)", len(got), want.Len())
	}
	if len(writes) < want.Len()/pipeAtomic {
		t.Fatalf("%d writes for %d bytes: lines go out a write each, not a pipe buffer at a time", len(writes), want.Len())
	}
}
