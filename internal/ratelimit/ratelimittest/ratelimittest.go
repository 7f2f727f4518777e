// Package ratelimittest owns the conformance suite every ratelimit.Store
// passes: the in-process one and the database one alike.
package ratelimittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// RunTests runs the suite against stores made by newStore; each call must
// return an empty store (or one whose keys do not collide with earlier
// ones').
func RunTests(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	t.Run("burst then refuse", func(t *testing.T) { burst(t, newStore(t)) })
	t.Run("refills one interval at a time", func(t *testing.T) { refill(t, newStore(t)) })
	t.Run("keys are independent", func(t *testing.T) { independent(t, newStore(t)) })
	t.Run("concurrent takes allow exactly the count", func(t *testing.T) { concurrent(t, newStore(t)) })
	t.Run("sweep forgets only expired keys", func(t *testing.T) { sweep(t, newStore(t)) })
	t.Run("reset forgets one key", func(t *testing.T) { reset(t, newStore(t)) })
	t.Run("peek reads without taking", func(t *testing.T) { peek(t, newStore(t)) })
}

const (
	second   = int64(time.Second / time.Microsecond)
	t0       = int64(1_900_000_000) * second
	period   = 60 * second
	count    = 5
	interval = period / count
)

func take(t *testing.T, st ratelimit.Store, key string, now int64) (int64, bool) {
	t.Helper()
	tat, ok, err := st.TakeRateLimit(context.Background(), key, now, interval, period)
	if err != nil {
		t.Fatalf("TakeRateLimit(%s, %d): %v", key, now, err)
	}
	return tat, ok
}

func burst(t *testing.T, st ratelimit.Store) {
	for i := 1; i <= count; i++ {
		tat, ok := take(t, st, "burst", t0)
		if !ok || tat != t0+int64(i)*interval {
			t.Fatalf("take %d = (%d, %v), want (%d, true)", i, tat, ok, t0+int64(i)*interval)
		}
	}
	// Refused: nothing changes, the stored TAT is reported.
	for i := 0; i < 3; i++ {
		tat, ok := take(t, st, "burst", t0+second)
		if ok || tat != t0+count*interval {
			t.Fatalf("take over the limit = (%d, %v), want (%d, false)", tat, ok, t0+count*interval)
		}
	}
}

func refill(t *testing.T, st ratelimit.Store) {
	for i := 0; i < count; i++ {
		take(t, st, "refill", t0)
	}
	// One interval later exactly one more request fits.
	if _, ok := take(t, st, "refill", t0+interval-1); ok {
		t.Fatalf("take just before one interval passed = allowed, want refused")
	}
	if _, ok := take(t, st, "refill", t0+interval); !ok {
		t.Fatalf("take after one interval = refused, want allowed")
	}
	if _, ok := take(t, st, "refill", t0+interval); ok {
		t.Fatalf("second take after one interval = allowed, want refused")
	}
	// A whole idle period later the full burst is back.
	later := t0 + 3*period
	for i := 0; i < count; i++ {
		if _, ok := take(t, st, "refill", later); !ok {
			t.Fatalf("take %d after idling = refused, want allowed", i)
		}
	}
}

func independent(t *testing.T, st ratelimit.Store) {
	for i := 0; i < count; i++ {
		take(t, st, "a", t0)
	}
	if _, ok := take(t, st, "a", t0); ok {
		t.Fatalf("key a over its limit allowed")
	}
	if _, ok := take(t, st, "b", t0); !ok {
		t.Fatalf("key b refused because of key a")
	}
}

func concurrent(t *testing.T, st ratelimit.Store) {
	const workers = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		errs    []error
	)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := st.TakeRateLimit(context.Background(), "race", t0, interval, period)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				allowed++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent takes failed: %v", errs)
	}
	if allowed != count {
		t.Fatalf("%d concurrent takes: %d allowed, want exactly %d", workers, allowed, count)
	}
}

func sweep(t *testing.T, st ratelimit.Store) {
	take(t, st, "old", t0)          // TAT t0+interval
	take(t, st, "fresh", t0+period) // TAT t0+period+interval
	n, err := st.SweepRateLimits(context.Background(), t0+period)
	if err != nil {
		t.Fatalf("SweepRateLimits: %v", err)
	}
	if n != 1 {
		t.Errorf("SweepRateLimits = %d, want 1", n)
	}
	// The fresh key kept its state: four more fit, not five.
	for i := 0; i < count-1; i++ {
		if _, ok := take(t, st, "fresh", t0+period); !ok {
			t.Fatalf("fresh take %d refused", i)
		}
	}
	if _, ok := take(t, st, "fresh", t0+period); ok {
		t.Errorf("fresh key lost its state in the sweep")
	}
	// The swept key starts over.
	if tat, ok := take(t, st, "old", t0+period); !ok || tat != t0+period+interval {
		t.Errorf("swept key take = (%d, %v), want (%d, true)", tat, ok, t0+period+interval)
	}
}

func reset(t *testing.T, st ratelimit.Store) {
	ctx := context.Background()
	for i := 0; i < count; i++ {
		take(t, st, "spent", t0)
		take(t, st, "other", t0)
	}
	if err := st.ResetRateLimit(ctx, "spent"); err != nil {
		t.Fatalf("ResetRateLimit(spent): %v", err)
	}
	// The whole burst is back for the reset key, at once.
	for i := 1; i <= count; i++ {
		if tat, ok := take(t, st, "spent", t0); !ok || tat != t0+int64(i)*interval {
			t.Fatalf("take %d after reset = (%d, %v), want (%d, true)", i, tat, ok, t0+int64(i)*interval)
		}
	}
	// Other keys keep their state.
	if _, ok := take(t, st, "other", t0); ok {
		t.Errorf("key other was reset along with key spent")
	}
	if err := st.ResetRateLimit(ctx, "absent"); err != nil {
		t.Errorf("ResetRateLimit(absent) = %v, want nil", err)
	}
}

func peek(t *testing.T, st ratelimit.Store) {
	ctx := context.Background()
	if tat, err := st.PeekRateLimit(ctx, "absent"); err != nil || tat != 0 {
		t.Fatalf("PeekRateLimit(absent) = %d, %v, want 0, nil", tat, err)
	}
	// Peeking an absent key creates nothing: a sweep finds nothing.
	if n, err := st.SweepRateLimits(ctx, t0+10*period); err != nil || n != 0 {
		t.Fatalf("SweepRateLimits after peeking = %d, %v, want 0, nil", n, err)
	}
	take(t, st, "k", t0)
	for i := 0; i < 3; i++ {
		if tat, err := st.PeekRateLimit(ctx, "k"); err != nil || tat != t0+interval {
			t.Fatalf("PeekRateLimit(k) #%d = %d, %v, want %d, nil", i+1, tat, err, t0+interval)
		}
	}
	// The peeks took nothing: the rest of the burst still fits.
	for i := 2; i <= count; i++ {
		if _, ok := take(t, st, "k", t0); !ok {
			t.Fatalf("take %d after peeking refused", i)
		}
	}
}
