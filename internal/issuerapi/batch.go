package issuerapi

import (
	"context"
	"sync"
	"time"
)

// batchTimeout bounds one run of a batcher's function, which no caller's
// context ends early: its answer is every waiting caller's.
const batchTimeout = 30 * time.Second

// batcher runs fn once for all the callers that arrive while a run is in
// progress, in one run that starts after it: every caller gets an answer
// computed after it called (it sees every write that finished before),
// and however many call at once, at most one run is in progress and one
// more is waiting. It is for answers that are the same for every caller
// and expensive to build, such as the full revocation feed.
type batcher[T any] struct {
	fn func(context.Context) (T, error)

	mu      sync.Mutex
	running bool
	next    *batch[T] // the run the next callers join; nil when none waits
}

type batch[T any] struct {
	done    chan struct{}
	callers int // guarded by the batcher's mu
	val     T
	err     error
}

func newBatcher[T any](fn func(context.Context) (T, error)) *batcher[T] {
	return &batcher[T]{fn: fn}
}

// do returns the answer of a run that started after the call, or ctx's
// error when ctx ends first (the run goes on for the others).
func (b *batcher[T]) do(ctx context.Context) (T, error) {
	b.mu.Lock()
	if b.next == nil {
		b.next = &batch[T]{done: make(chan struct{})}
	}
	mine := b.next
	mine.callers++
	if !b.running {
		b.running = true
		b.next = nil
		go b.run(mine)
	}
	b.mu.Unlock()
	select {
	case <-mine.done:
		return mine.val, mine.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// run runs fn for bt, then for the batch that gathered meanwhile, until
// none did.
func (b *batcher[T]) run(bt *batch[T]) {
	for bt != nil {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		bt.val, bt.err = b.fn(ctx)
		cancel()
		close(bt.done)
		b.mu.Lock()
		bt, b.next = b.next, nil
		b.running = bt != nil
		b.mu.Unlock()
	}
}
