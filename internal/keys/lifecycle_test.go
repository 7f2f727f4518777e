package keys_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/store"
)

const (
	interval   = time.Hour
	activateIn = 10 * time.Minute
)

// newRotatingManager is newManager with scheduled rotation every interval.
func newRotatingManager(st store.Store, sealer *keys.Sealer, clk *clocktest.Clock) *keys.Manager {
	return keys.NewManager(st, sealer, keys.Options{
		AccessTokenTTL: accessTTL, ClockSkew: skew, ReloadInterval: reload,
		ActivateIn: activateIn, RotationInterval: interval,
	}, clk.Now, rand.Reader)
}

// maintain runs one schedule round and fails the test on error.
func maintain(t *testing.T, m *keys.Manager) bool {
	t.Helper()
	created, err := m.Maintain(context.Background(), nil)
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	return created
}

// byState returns the kids List reports in state, in list order.
func byState(t *testing.T, m *keys.Manager, state string) []string {
	t.Helper()
	var out []string
	for kid, s := range states(t, m) {
		if s == state {
			out = append(out, kid)
		}
	}
	slices.Sort(out)
	return out
}

// TestMaintainAcrossIntervals runs two replicas' schedules every five
// minutes for several intervals: one key per interval between them, a next
// key always published once a round has run, exactly one active key, and
// signing never interrupted; the kid changes exactly at each interval.
func TestMaintainAcrossIntervals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		replicas := []*keys.Manager{newRotatingManager(b.open(t), sealer, clk), newRotatingManager(b.open(t), sealer, clk)}
		if !maintain(t, replicas[0]) {
			t.Fatal("Maintain on an empty store created nothing")
		}
		first := signingKID(t, replicas[0])
		if got := byState(t, replicas[0], keys.StateNext); len(got) != 1 {
			t.Fatalf("next keys after the first round = %v, want one", got)
		}

		const intervals = 4
		created := 0
		seen := []string{first}
		step := 5 * time.Minute
		for elapsed := step; elapsed <= intervals*interval; elapsed += step {
			clk.Advance(step)
			for _, m := range replicas {
				if maintain(t, m) {
					created++
				}
			}
			for i, m := range replicas {
				if got := byState(t, m, keys.StateActive); len(got) != 1 {
					t.Fatalf("at +%s replica %d: active keys = %v, want exactly one", elapsed, i, got)
				}
				if got := byState(t, m, keys.StateNext); len(got) != 1 {
					t.Fatalf("at +%s replica %d: next keys = %v, want one published", elapsed, i, got)
				}
			}
			// Replicas that have not reloaded still sign with the key the
			// schedule says: activation is a time, not a write.
			kid := signingKID(t, replicas[1])
			if got := signingKID(t, replicas[0]); got != kid {
				t.Fatalf("at +%s replicas sign with %s and %s, want the same key", elapsed, got, kid)
			}
			if kid != seen[len(seen)-1] {
				if elapsed%interval != 0 {
					t.Errorf("signing key changed at +%s, want changes only at multiples of %s", elapsed, interval)
				}
				seen = append(seen, kid)
			}
		}
		if created != intervals {
			t.Errorf("keys created by the rounds over %d intervals = %d, want %d", intervals, created, intervals)
		}
		if len(seen) != intervals+1 {
			t.Errorf("signing keys over %d intervals = %d, want %d", intervals, len(seen), intervals+1)
		}
		// Retired keys leave the key set once their tokens have expired:
		// only the last few are still listed.
		if got := jwksKids(t, replicas[0]); len(got) > 3 {
			t.Errorf("JWKS after %d intervals = %v, want the active, the next and at most one retired key", intervals, got)
		}
	})
}

// TestMaintainConcurrent runs the schedule in several replicas at once:
// one next key between them.
func TestMaintainConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		const n = 4
		ms := make([]*keys.Manager, n)
		for i := range ms {
			ms[i] = newRotatingManager(b.open(t), sealer, clk)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := m.Maintain(context.Background(), nil); err != nil {
					t.Errorf("Maintain: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		ks, err := b.open(t).SigningKeys(context.Background(), clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) != 2 {
			t.Errorf("%d concurrent Maintain calls left %d keys, want 2 (active and next)", n, len(ks))
		}
	})
}

// TestMaintainRecords checks that a scheduled key is recorded in its
// transaction with the key it retires, and that a round with nothing to do
// records nothing.
func TestMaintainRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := clocktest.New(epoch)
		m := newRotatingManager(b.open(t), newSealer(t, testKEK(t)), clk)
		var got [][]string
		record := func(_ store.Queries, kid string, retired []string) error {
			got = append(got, append([]string{kid}, retired...))
			return nil
		}
		if _, err := m.Maintain(context.Background(), record); err != nil {
			t.Fatal(err)
		}
		active := signingKID(t, m)
		next := byState(t, m, keys.StateNext)
		if want := [][]string{{next[0], active}}; len(got) != 1 || !slices.Equal(got[0], want[0]) {
			t.Errorf("Maintain recorded %q, want %q", got, want)
		}
		if _, err := m.Maintain(context.Background(), record); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Errorf("a second round recorded %q, want nothing more", got[1:])
		}
	})
}

func TestRevokeActive(t *testing.T) {
	for _, withNext := range []bool{true, false} {
		name := "no next key"
		if withNext {
			name = "next key published"
		}
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				clk := clocktest.New(epoch)
				sealer := newSealer(t, testKEK(t))
				st := b.open(t)
				m := newManager(st, sealer, clk)
				other := newManager(b.open(t), sealer, clk)
				if err := m.EnsureKey(ctx); err != nil {
					t.Fatal(err)
				}
				old := signingKID(t, m)
				var next string
				if withNext {
					info, err := m.Rotate(ctx, time.Hour, nil)
					if err != nil {
						t.Fatal(err)
					}
					next = info.KID
				}
				clk.Advance(time.Second)
				if got := signingKID(t, other); got != old {
					t.Fatalf("other replica signs with %s, want %s", got, old)
				}

				var rec keys.Revocation
				calls := 0
				info, err := m.Revoke(ctx, old, func(_ store.Queries, r keys.Revocation) error {
					rec, calls = r, calls+1
					return nil
				})
				if err != nil {
					t.Fatalf("Revoke(%s): %v", old, err)
				}
				if info.State != keys.StateRevoked || info.RevokedAt == nil {
					t.Errorf("Revoke(%s) = %+v, want state revoked with revoked_at", old, info)
				}
				if calls != 1 || rec.Key.KID != old || rec.Key.State != keys.StateActive || rec.Successor == "" {
					t.Errorf("Revoke(%s) recorded %+v (%d calls), want the active key and a successor", old, rec, calls)
				}
				if withNext && rec.Successor != next {
					t.Errorf("Revoke(active) successor = %s, want the published next key %s", rec.Successor, next)
				}
				if got := signingKID(t, m); got != rec.Successor {
					t.Errorf("SigningKey after Revoke(active) = %s, want the successor %s", got, rec.Successor)
				}
				if got := jwksKids(t, m); slices.Contains(got, old) || !slices.Contains(got, rec.Successor) {
					t.Errorf("JWKS after Revoke = %v, want %s and not %s", got, rec.Successor, old)
				}
				if _, err := m.Key(ctx, old); !errors.Is(err, keys.ErrUnknownKey) {
					t.Errorf("Key(revoked) error = %v, want ErrUnknownKey", err)
				}
				if got := byState(t, m, keys.StateActive); !slices.Equal(got, []string{rec.Successor}) {
					t.Errorf("active keys after Revoke = %v, want [%s]", got, rec.Successor)
				}

				// Another replica sees it within the reload interval.
				clk.Advance(reload)
				if got := signingKID(t, other); got != rec.Successor {
					t.Errorf("other replica after its reload signs with %s, want %s", got, rec.Successor)
				}
				if _, err := other.Key(ctx, old); !errors.Is(err, keys.ErrUnknownKey) {
					t.Errorf("other replica Key(revoked) error = %v, want ErrUnknownKey", err)
				}

				// Revoking again changes nothing and records nothing.
				again, err := m.Revoke(ctx, old, func(store.Queries, keys.Revocation) error {
					calls++
					return nil
				})
				if err != nil || calls != 1 || again.State != keys.StateRevoked {
					t.Errorf("Revoke(revoked) = %+v, %v (%d records), want it revoked, nil, no record", again, err, calls)
				}
				// Listed as revoked until its tokens cannot be valid.
				clk.Advance(margin)
				if _, ok := states(t, m)[old]; ok {
					t.Errorf("List %s after its tokens expired = listed, want gone", old)
				}
			})
		})
	}
}

// TestRevokeNext revokes the published next key: the active key keeps
// signing past the time it was to retire, and the schedule publishes a new
// next key.
func TestRevokeNext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newRotatingManager(b.open(t), newSealer(t, testKEK(t)), clk)
		maintain(t, m)
		active := signingKID(t, m)
		next := byState(t, m, keys.StateNext)[0]
		if _, err := m.Revoke(ctx, next, nil); err != nil {
			t.Fatalf("Revoke(next): %v", err)
		}
		if got := jwksKids(t, m); slices.Contains(got, next) {
			t.Errorf("JWKS after Revoke(next) = %v, want no %s", got, next)
		}
		if !maintain(t, m) {
			t.Error("Maintain after Revoke(next) created nothing, want a new next key")
		}
		renewed := byState(t, m, keys.StateNext)
		if len(renewed) != 1 || renewed[0] == next {
			t.Fatalf("next keys after Revoke(next) and Maintain = %v, want a new one", renewed)
		}
		clk.Advance(interval - time.Second)
		if got := signingKID(t, m); got != active {
			t.Errorf("SigningKey before the new next key activates = %s, want %s", got, active)
		}
		clk.Advance(time.Second)
		if got := signingKID(t, m); got != renewed[0] {
			t.Errorf("SigningKey at the new next key's activation = %s, want %s", got, renewed[0])
		}
	})
}

// TestRevokeNextNoSchedule revokes the next key with rotation off: the
// active key keeps signing, and stays published, for good.
func TestRevokeNextNoSchedule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatal(err)
		}
		active := signingKID(t, m)
		next, err := m.Rotate(ctx, time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Revoke(ctx, next.KID, nil); err != nil {
			t.Fatalf("Revoke(next): %v", err)
		}
		clk.Advance(24 * time.Hour)
		if got := signingKID(t, m); got != active {
			t.Errorf("SigningKey a day after Revoke(next) = %s, want %s", got, active)
		}
		if got := jwksKids(t, m); !slices.Equal(got, []string{active}) {
			t.Errorf("JWKS a day after Revoke(next) = %v, want [%s]", got, active)
		}
	})
}

func TestRevokeRetiredAndUnknown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatal(err)
		}
		old := signingKID(t, m)
		clk.Advance(time.Second)
		cur, err := m.Rotate(ctx, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rec keys.Revocation
		if _, err := m.Revoke(ctx, old, func(_ store.Queries, r keys.Revocation) error { rec = r; return nil }); err != nil {
			t.Fatalf("Revoke(retired): %v", err)
		}
		if rec.Key.State != keys.StateRetired || rec.Successor != "" {
			t.Errorf("Revoke(retired) recorded %+v, want state retired and no successor", rec)
		}
		if got := signingKID(t, m); got != cur.KID {
			t.Errorf("SigningKey after Revoke(retired) = %s, want %s", got, cur.KID)
		}
		if got := jwksKids(t, m); !slices.Equal(got, []string{cur.KID}) {
			t.Errorf("JWKS after Revoke(retired) = %v, want [%s]", got, cur.KID)
		}
		if _, err := m.Revoke(ctx, "no-such-kid", nil); !errors.Is(err, keys.ErrNotFound) {
			t.Errorf("Revoke(unknown) error = %v, want ErrNotFound", err)
		}
	})
}
