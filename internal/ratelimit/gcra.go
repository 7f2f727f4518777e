package ratelimit

import (
	"context"
	"time"
)

// TATStore keeps GCRA state as one theoretical arrival time (TAT) per key,
// in Unix microseconds: the database's rate_limits table and the in-process
// table. [NewGCRA] makes a [Store] of one, on the caller's clock.
type TATStore interface {
	// TakeRateLimit atomically does one GCRA step for key at now (Unix
	// microseconds), or at the latest time a step of key ran at if that is
	// later (at: a take that waited behind a later one, or whose replica's
	// clock lags, does not go back in time): with tat = max(stored TAT, at),
	// when tat + interval - at <= period it stores tat + interval and
	// reports allowed; otherwise it changes only the key's time. It returns
	// the TAT stored after the call and at.
	TakeRateLimit(ctx context.Context, key string, now, interval, period int64) (tat, at int64, allowed bool, err error)
	// SweepRateLimits forgets every key whose TAT is before now (Unix
	// microseconds): such a key is as good as new.
	SweepRateLimits(ctx context.Context, now int64) (int64, error)
	// ResetRateLimit forgets key, whatever its TAT: its next take finds the
	// whole quota. Forgetting an absent key is not an error.
	ResetRateLimit(ctx context.Context, key string) error
	// PeekRateLimit returns key's stored TAT without changing it, 0 when
	// the key is absent.
	PeekRateLimit(ctx context.Context, key string) (int64, error)
}

// GCRA is a Store over a TATStore.
type GCRA struct{ st TATStore }

var (
	_ Store   = (*GCRA)(nil)
	_ Sweeper = (*GCRA)(nil)
)

// NewGCRA returns the Store that keeps its state in st.
func NewGCRA(st TATStore) *GCRA { return &GCRA{st: st} }

// Take implements Counters.
func (g *GCRA) Take(ctx context.Context, key string, l Limit, now time.Time) (Result, error) {
	interval, period := l.micros()
	tat, t, allowed, err := g.st.TakeRateLimit(ctx, key, now.UnixMicro(), interval, period)
	if err != nil {
		return Result{}, err
	}
	r := Result{Allowed: allowed, ResetAfter: time.Duration(max(tat, t)-t) * time.Microsecond}
	if allowed {
		// Room left in the period beyond the TAT, in whole requests.
		r.Remaining = int(min(int64(l.Count), max(0, (period-(tat-t))/interval)))
		return r, nil
	}
	// The next request fits once tat + interval - t <= period.
	r.RetryAfter = time.Duration(tat+interval-period-t) * time.Microsecond
	return r, nil
}

// Reset implements Counters.
func (g *GCRA) Reset(ctx context.Context, key string) error { return g.st.ResetRateLimit(ctx, key) }

// Mark implements Marks. The mark is a key whose TAT is in the future: a
// GCRA take with interval ttl and period twice that moves it to at least
// now+ttl (at most now+2*ttl), and the sweeper forgets it once it has
// passed.
func (g *GCRA) Mark(ctx context.Context, key string, now time.Time, ttl time.Duration) error {
	w := ttl.Microseconds()
	_, _, _, err := g.st.TakeRateLimit(ctx, key, now.UnixMicro(), w, 2*w)
	return err
}

// Marked implements Marks.
func (g *GCRA) Marked(ctx context.Context, key string, now time.Time) (bool, error) {
	tat, err := g.st.PeekRateLimit(ctx, key)
	if err != nil {
		return false, err
	}
	return tat > now.UnixMicro(), nil
}

// Sweep implements Sweeper.
func (g *GCRA) Sweep(ctx context.Context, now time.Time) (int64, error) {
	return g.st.SweepRateLimits(ctx, now.UnixMicro())
}
