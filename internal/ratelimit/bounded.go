package ratelimit

import (
	"context"
	"time"
)

// DatabaseTimeout bounds each call to the database store. The Redis store
// has its own (--rate-limit-store-timeout); without one, a take waited as
// long as the rate_limits table stayed locked (40 s behind a LOCK TABLE
// held that long), and 60 such requests held every connection of the
// pool, so the revocation feed, which takes no limit, waited 10 s too. It
// is longer than Redis's: the counters share the database, and its pool,
// with the requests they guard, and a loaded database answers in hundreds
// of milliseconds without failing.
const DatabaseTimeout = 2 * time.Second

// bounded is a Store each of whose calls waits at most timeout; the
// call's error then says context.DeadlineExceeded, and the limit's policy
// applies.
type bounded struct {
	st      Store
	timeout time.Duration
}

// Bounded returns st with each call bounded by timeout.
func Bounded(st Store, timeout time.Duration) Store { return bounded{st, timeout} }

func (b bounded) Take(ctx context.Context, key string, l Limit, now time.Time) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.st.Take(ctx, key, l, now)
}

func (b bounded) Reset(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.st.Reset(ctx, key)
}

func (b bounded) Mark(ctx context.Context, key string, now time.Time, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.st.Mark(ctx, key, now, ttl)
}

func (b bounded) Marked(ctx context.Context, key string, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.st.Marked(ctx, key, now)
}
