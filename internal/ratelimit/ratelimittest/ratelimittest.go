// Package ratelimittest owns the conformance suite every ratelimit.Store
// passes: the in-process one, the database one and the Redis one alike.
//
// The suite runs on the real clock, since a store may keep its own (Redis
// uses the server's): quotas are long enough that the time a test takes
// cannot refill them, and what needs time to pass waits for the state it
// expects, with a deadline.
package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// RunTests runs the suite against stores made by newStore; each call must
// return an empty store (or one whose keys do not collide with earlier
// ones').
func RunTests(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	t.Run("burst then refuse", func(t *testing.T) { burst(t, newStore(t)) })
	t.Run("remaining is exact with uneven intervals", func(t *testing.T) { uneven(t, newStore(t)) })
	t.Run("refills one interval at a time", func(t *testing.T) { refill(t, newStore(t)) })
	t.Run("keys are independent", func(t *testing.T) { independent(t, newStore(t)) })
	t.Run("concurrent takes allow exactly the count", func(t *testing.T) { concurrent(t, newStore(t)) })
	t.Run("a late take runs at the time its key has reached", func(t *testing.T) { late(t, newStore(t)) })
	t.Run("reset forgets one key", func(t *testing.T) { reset(t, newStore(t)) })
	t.Run("marks last their time", func(t *testing.T) { marks(t, newStore(t)) })
	t.Run("sweep forgets only expired keys", func(t *testing.T) { sweep(t, newStore(t)) })
	t.Run("a caller that hung up is neither let through nor a store failure", func(t *testing.T) { hungUp(t, newStore(t)) })
}

// slow is a limit no test outlasts: one request per 20 s.
var slow = ratelimit.Limit{Count: 5, Period: 100 * time.Second}

func take(t *testing.T, st ratelimit.Store, key string, l ratelimit.Limit) ratelimit.Result {
	t.Helper()
	r, err := st.Take(context.Background(), key, l, time.Now())
	if err != nil {
		t.Fatalf("Take(%s, %v): %v", key, l, err)
	}
	return r
}

// within reports whether got is in (want-slack, want+1ms]: a duration the
// store computed a little after the test's reference point (the
// millisecond absorbs Redis's float seconds).
func within(got, want, slack time.Duration) bool {
	return got <= want+time.Millisecond && got > want-slack
}

// eventually calls ok until it is true or 10 s have passed.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func burst(t *testing.T, st ratelimit.Store) {
	interval := slow.Period / time.Duration(slow.Count)
	for i := 1; i <= slow.Count; i++ {
		r := take(t, st, "burst", slow)
		if !r.Allowed || r.Remaining != slow.Count-i || !within(r.ResetAfter, time.Duration(i)*interval, 5*time.Second) {
			t.Fatalf("Take #%d = %+v, want allowed, %d remaining, reset after %v", i, r, slow.Count-i, time.Duration(i)*interval)
		}
	}
	// Refused: nothing changes, so every refusal reports the same state.
	for i := 0; i < 3; i++ {
		r := take(t, st, "burst", slow)
		if r.Allowed || r.Remaining != 0 || !within(r.RetryAfter, interval, 5*time.Second) || !within(r.ResetAfter, slow.Period, 5*time.Second) {
			t.Fatalf("Take over the limit = %+v, want refused, retry after %v, reset after %v", r, interval, slow.Period)
		}
	}
}

// uneven checks Remaining where the interval is no whole number of
// anything (7 per 13 s), on many keys: a store computing in floats must not
// come out one short.
func uneven(t *testing.T, st ratelimit.Store) {
	l := ratelimit.Limit{Count: 7, Period: 13 * time.Second}
	for k := 0; k < 50; k++ {
		key := fmt.Sprintf("uneven-%d", k)
		for i := 1; i <= 3; i++ {
			if r := take(t, st, key, l); !r.Allowed || r.Remaining != l.Count-i {
				t.Fatalf("Take #%d of %s = %+v, want allowed with %d remaining", i, key, r, l.Count-i)
			}
		}
	}
}

// late: a take whose now is earlier than one its key has already run at
// (it waited on the store behind a later request, or came from a replica
// whose clock lags) runs at that later time, so the quota's last request
// is not refused by the delay. A store on its own clock never sees one.
func late(t *testing.T, st ratelimit.Store) {
	l := ratelimit.Limit{Count: 2, Period: time.Second}
	now := time.Now()
	for i, at := range []time.Time{now.Add(50 * time.Millisecond), now} {
		r, err := st.Take(context.Background(), "late", l, at)
		if err != nil || !r.Allowed || r.Remaining != l.Count-1-i {
			t.Fatalf("Take #%d of 2 = %+v, %v; want allowed with %d remaining", i+1, r, err, l.Count-1-i)
		}
	}
	if r, err := st.Take(context.Background(), "late", l, now.Add(50*time.Millisecond)); err != nil || r.Allowed {
		t.Fatalf("Take #3 of 2 = %+v, %v; want refused", r, err)
	}
}

func refill(t *testing.T, st ratelimit.Store) {
	// One request per second; the burst is two.
	l := ratelimit.Limit{Count: 2, Period: 2 * time.Second}
	take(t, st, "refill", l)
	take(t, st, "refill", l)
	if r := take(t, st, "refill", l); r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Second+time.Millisecond {
		t.Fatalf("Take over the limit = %+v, want refused, retry after (0, 1s]", r)
	}
	// Refusals take nothing: once an interval has passed exactly one more
	// request fits.
	eventually(t, "a take allowed after the burst", func() bool { return take(t, st, "refill", l).Allowed })
	if r := take(t, st, "refill", l); r.Allowed {
		t.Fatalf("second take after one interval = %+v, want refused", r)
	}
}

func independent(t *testing.T, st ratelimit.Store) {
	for i := 0; i < slow.Count; i++ {
		take(t, st, "a", slow)
	}
	if take(t, st, "a", slow).Allowed {
		t.Fatalf("key a over its limit allowed")
	}
	if !take(t, st, "b", slow).Allowed {
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
			r, err := st.Take(context.Background(), "race", slow, time.Now())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if r.Allowed {
				allowed++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent takes failed: %v", errs)
	}
	if allowed != slow.Count {
		t.Fatalf("%d concurrent takes: %d allowed, want exactly %d", workers, allowed, slow.Count)
	}
}

func reset(t *testing.T, st ratelimit.Store) {
	ctx := context.Background()
	for i := 0; i < slow.Count; i++ {
		take(t, st, "spent", slow)
		take(t, st, "other", slow)
	}
	if err := st.Reset(ctx, "spent"); err != nil {
		t.Fatalf("Reset(spent): %v", err)
	}
	// The whole burst is back for the reset key, at once.
	for i := 1; i <= slow.Count; i++ {
		if r := take(t, st, "spent", slow); !r.Allowed || r.Remaining != slow.Count-i {
			t.Fatalf("Take #%d after reset = %+v, want allowed with %d remaining", i, r, slow.Count-i)
		}
	}
	// Other keys keep their state.
	if take(t, st, "other", slow).Allowed {
		t.Errorf("key other was reset along with key spent")
	}
	if err := st.Reset(ctx, "absent"); err != nil {
		t.Errorf("Reset(absent) = %v, want nil", err)
	}
}

func marks(t *testing.T, st ratelimit.Store) {
	ctx := context.Background()
	marked := func(key string) bool {
		t.Helper()
		ok, err := st.Marked(ctx, key, time.Now())
		if err != nil {
			t.Fatalf("Marked(%s): %v", key, err)
		}
		return ok
	}
	if marked("m") {
		t.Fatalf("Marked(m) before Mark = true")
	}
	if err := st.Mark(ctx, "m", time.Now(), time.Hour); err != nil {
		t.Fatalf("Mark(m): %v", err)
	}
	for i := 0; i < 3; i++ {
		if !marked("m") {
			t.Fatalf("Marked(m) #%d after Mark = false", i+1)
		}
	}
	if marked("n") {
		t.Errorf("Marked(n) = true after marking m")
	}
	// Reset forgets a mark like a counter.
	if err := st.Reset(ctx, "m"); err != nil {
		t.Fatalf("Reset(m): %v", err)
	}
	if marked("m") {
		t.Errorf("Marked(m) after Reset = true")
	}
	// A mark ends (after ttl, at most twice that).
	if err := st.Mark(ctx, "short", time.Now(), 300*time.Millisecond); err != nil {
		t.Fatalf("Mark(short): %v", err)
	}
	eventually(t, "a 300ms mark ended", func() bool { return !marked("short") })
}

func sweep(t *testing.T, st ratelimit.Store) {
	sw, ok := st.(ratelimit.Sweeper)
	if !ok {
		t.Skip("the store expires its keys itself")
	}
	ctx := context.Background()
	now := time.Now()
	// Steps at explicit times: a store that sweeps uses the caller's clock.
	if _, err := st.Take(ctx, "old", slow, now.Add(-2*slow.Period)); err != nil {
		t.Fatal(err)
	}
	take(t, st, "fresh", slow)
	if n, err := sw.Sweep(ctx, now); err != nil || n != 1 {
		t.Errorf("Sweep = %d, %v, want 1, nil", n, err)
	}
	// The fresh key kept its state: four more fit, not five.
	for i := 0; i < slow.Count-1; i++ {
		if !take(t, st, "fresh", slow).Allowed {
			t.Fatalf("fresh take %d refused", i)
		}
	}
	if take(t, st, "fresh", slow).Allowed {
		t.Errorf("fresh key lost its state in the sweep")
	}
}

// hungUp: a check whose context has ended (its client hung up once the
// body was sent) after its subject's quota is spent is never let through,
// under a fail-open limit as under a fail-closed one. A store that looks
// at the context fails it, and the limiter answers with the context's
// error, which is no store failure; one that does not refuses it.
func hungUp(t *testing.T, st ratelimit.Store) {
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := ratelimit.New(st, []string{"password_forgot_email=1/1h", "login=1/1h"}, time.Now, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	notLetThrough := func(what string, d ratelimit.Decision, err error) {
		t.Helper()
		if d.Allowed || err != nil && (!errors.Is(err, context.Canceled) || errors.Is(err, ratelimit.ErrStore)) {
			t.Errorf("%s, its client gone = %+v, %v; want it refused, or the context's error", what, d, err)
		}
	}
	for _, name := range []string{ratelimit.PasswordForgotEmail, ratelimit.Login} {
		if d, err := l.Allow(context.Background(), name, "owner@example.com"); err != nil || !d.Allowed {
			t.Fatalf("%s: first check = %+v, %v; want it allowed", name, d, err)
		}
		d, err := l.Allow(gone, name, "owner@example.com")
		notLetThrough(name+": second check", d, err)
	}
	if _, err := l.Remembered(gone, ratelimit.KnownLoginClient, "owner@example.com"); errors.Is(err, ratelimit.ErrStore) {
		t.Errorf("Remembered, its client gone = %v; want no store failure", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "issuer_rate_limit_store_errors_total" {
			t.Errorf("issuer_rate_limit_store_errors_total has %d series; want none: no store failed", len(f.GetMetric()))
		}
	}
}
