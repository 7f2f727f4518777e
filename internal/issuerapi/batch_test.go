package issuerapi

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Callers that arrive while a run is in progress share the next run, which
// starts after the current one: each answer is computed after its caller
// called, and many callers cost two runs, not one each.
func TestBatcherJoinsCallersIntoTheNextRun(t *testing.T) {
	var runs atomic.Int64
	started, release := make(chan int64, 10), make(chan struct{})
	b := newBatcher(func(context.Context) (int64, error) {
		n := runs.Add(1)
		started <- n
		<-release
		return n, nil
	})
	first := make(chan int64)
	go func() { v, _ := b.do(context.Background()); first <- v }()
	if n := <-started; n != 1 {
		t.Fatalf("first run is number %d", n)
	}
	// Run 1 is in progress: these callers arrive after it started, so
	// its answer is too old for them.
	const late = 20
	var wg sync.WaitGroup
	got := make([]int64, late)
	for i := range late {
		wg.Go(func() { got[i], _ = b.do(context.Background()) })
	}
	for deadline := time.Now().Add(10 * time.Second); b.waiting() < late; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d late callers wait for the next run after 10s", b.waiting(), late)
		}
	}
	close(release)
	if v := <-first; v != 1 {
		t.Fatalf("the first caller got run %d, want 1", v)
	}
	wg.Wait()
	for i, v := range got {
		if v != 2 {
			t.Fatalf("late caller %d got run %d, which started before it called", i, v)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d callers made %d runs, want 2 (the one in progress and the batch after it)", late+1, n)
	}
}

// A caller whose context ends stops waiting; the run and the other
// callers go on, and an error of the run reaches everyone in it.
func TestBatcherCallerContextAndRunError(t *testing.T) {
	release := make(chan struct{})
	boom := errors.New("database down")
	b := newBatcher(func(context.Context) (int, error) { <-release; return 0, boom })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := b.do(ctx); errc <- err }()
	other := make(chan error, 1)
	go func() { _, err := b.do(context.Background()); other <- err }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("do with its context cancelled = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("do did not return when its context ended")
	}
	close(release)
	if err := <-other; !errors.Is(err, boom) {
		t.Fatalf("do = %v, want the run's error", err)
	}
}

// waiting returns how many callers wait for the run after the one in
// progress.
func (b *batcher[T]) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		return 0
	}
	return b.next.callers
}
