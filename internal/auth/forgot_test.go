package auth_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// touching is the real store, counting the calls that read or write an
// account.
type touching struct {
	store.Store
	n *atomic.Int32
}

func (s touching) UserByEmail(ctx context.Context, email string) (store.User, error) {
	s.n.Add(1)
	return s.Store.UserByEmail(ctx, email)
}

func (s touching) InTx(ctx context.Context, fn func(store.Queries) error) error {
	s.n.Add(1)
	return s.Store.InTx(ctx, fn)
}

// ForgotPassword gives its answer before it touches the database, for a
// registered address and an unknown one alike: nothing in the answer, its
// bytes or its timing, can depend on whether the account exists. The
// lookup and the mail follow once the request is answered (its context
// done). The latency comparison itself is a benchmark
// (BenchmarkForgotPasswordLatency in internal/e2e), not a test.
func TestForgotPasswordAnswersBeforeAnyLookup(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		f.user(t, "known@example.com")
		var touched atomic.Int32
		svc := f.over(touching{Store: f.st, n: &touched})
		for _, email := range []string{"known@example.com", "unknown@example.com"} {
			touched.Store(0)
			ctx, answered := context.WithCancel(context.Background())
			if err := svc.ForgotPassword(ctx, email, auth.Meta{}); err != nil {
				t.Fatalf("ForgotPassword(%q) = %v, want nil", email, err)
			}
			if n := touched.Load(); n != 0 {
				t.Errorf("ForgotPassword(%q) touched the store %d times before its answer, want 0", email, n)
			}
			answered()
			svc.Wait()
			if touched.Load() == 0 {
				t.Errorf("ForgotPassword(%q): no lookup after the answer", email)
			}
		}
		jobs, err := f.st.ClaimMail(context.Background(), f.clock.Now().Add(time.Hour), 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resets := map[string]int{}
		for _, j := range jobs {
			if j.Kind == store.PurposePasswordReset {
				resets[j.To]++
			}
		}
		if resets["known@example.com"] != 1 || len(resets) != 1 {
			t.Errorf("reset mails queued = %v, want one, for known@example.com only", resets)
		}
	})
}
