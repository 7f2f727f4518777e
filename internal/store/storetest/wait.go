package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// LockWaiter is what a store under test offers so that the suite can tell
// when a racing operation is waiting for a lock: the number of operations
// waiting for a lock held by another transaction.
type LockWaiter interface {
	LockWaiters(ctx context.Context) (int, error)
}

// waitBlocked returns once the operation whose result arrives on done is
// waiting for a lock (the caller holds it), or an error if the operation
// finished instead: it did not wait, which is what the races look for.
// It polls the store, not the clock: a slow machine only makes it poll
// longer. The deadline is a guard against a hang, not a timing assumption.
func waitBlocked(ctx context.Context, s store.Store, what string, done <-chan error) error {
	lw, ok := s.(LockWaiter)
	if !ok {
		return fmt.Errorf("the store %T does not report lock waiters (storetest.LockWaiter)", s)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			return fmt.Errorf("%s returned (%v) while the transaction holding the user was uncommitted", what, err)
		default:
		}
		n, err := lw.LockWaiters(ctx)
		if err != nil {
			return fmt.Errorf("LockWaiters: %w", err)
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s neither finished nor waited for a lock within a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}
