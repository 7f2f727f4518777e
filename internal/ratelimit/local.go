package ratelimit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// localCounts is one replica's own count of the fail-open limits, taken
// while the shared store fails. Letting those requests through uncounted
// let a burst through whole: with a Redis 50 ms away and its connections
// not yet open (at start, after a Redis restart), every call of 100
// concurrent forgot-password requests from one address spent its timeout
// dialling, and all 100 passed a limit of 5 and queued 100 reset mails for
// one account. Counted here, each replica passes at most the limit while
// the store fails, so N replicas at most N times it; a replica that just
// started, or whose store has just failed, counts from a whole quota (so
// across that moment a subject may pass its limit twice).
//
// It holds at most maxLocalKeys subjects, about 300 bytes each with the
// map: a take of one more, once a sweep has found none expired, fails
// with errTableFull, and the request passes uncounted, as all did before. Keys are swept by the calls that use
// them, at most once every localSweepEvery, so a store that never fails
// costs nothing. Safe for concurrent use.
type localCounts struct {
	table     *memoryTable
	gcra      *GCRA
	lastSweep atomic.Int64 // Unix µs
}

// maxLocalKeys bounds localCounts: 50,000 subjects took the heap up 15 MB.
const maxLocalKeys = 50_000

// localSweepEvery is how often at most the keys are swept: a sweep visits
// each of them under its shard's lock.
const localSweepEvery = time.Minute

func newLocalCounts(maxKeys int64) *localCounts {
	t := newMemoryTable(maxKeys)
	return &localCounts{table: t, gcra: NewGCRA(t)}
}

// take does one GCRA step of l for key at now.
func (c *localCounts) take(key string, l Limit, now time.Time) (Result, error) {
	c.sweep(now, localSweepEvery)
	r, err := c.gcra.Take(context.Background(), key, l, now)
	if errors.Is(err, errTableFull) && c.sweep(now, time.Second) {
		r, err = c.gcra.Take(context.Background(), key, l, now)
	}
	return r, err
}

// sweep forgets the expired keys when no sweep has started in the last
// every, and reports whether it did.
func (c *localCounts) sweep(now time.Time, every time.Duration) bool {
	last, at := c.lastSweep.Load(), now.UnixMicro()
	if at-last < every.Microseconds() || !c.lastSweep.CompareAndSwap(last, at) {
		return false
	}
	_, _ = c.table.SweepRateLimits(context.Background(), at) // never fails
	return true
}
