package webhook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

func claim(t *testing.T, s webhook.Store, id string, now time.Time) webhook.State {
	t.Helper()
	st, err := s.Claim(context.Background(), id, now)
	if err != nil {
		t.Fatalf("Claim(%q) = %v", id, err)
	}
	return st
}

func TestMemoryStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1700000000, 0)
	s := webhook.NewMemoryStore(10, time.Minute)
	steps := []struct {
		do   func() error
		id   string
		at   time.Duration
		want webhook.State
	}{
		{nil, "a", 0, webhook.StateNew},
		{nil, "a", time.Second, webhook.StateInProgress},
		{func() error { return s.Release(ctx, "a") }, "a", 2 * time.Second, webhook.StateNew}, // failed: the retry is processed
		{func() error { return s.Complete(ctx, "a", t0.Add(3*time.Second)) }, "a", 4 * time.Second, webhook.StateDone},
		{func() error { return s.Release(ctx, "a") }, "a", 5 * time.Second, webhook.StateDone}, // Release leaves done alone
		{nil, "a", 3*time.Second + time.Minute - 1, webhook.StateDone},
		{nil, "a", 3*time.Second + time.Minute, webhook.StateNew}, // forgotten ttl after Complete
		{nil, "b", 2 * time.Minute, webhook.StateNew},
		{nil, "b", 3 * time.Minute, webhook.StateNew}, // an unfinished claim lapses after ttl
		{func() error { return s.Complete(ctx, "gone", t0.Add(3*time.Minute)) }, "gone", 3 * time.Minute, webhook.StateDone},
	}
	for i, st := range steps {
		if st.do != nil {
			if err := st.do(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if got := claim(t, s, st.id, t0.Add(st.at)); got != st.want {
			t.Errorf("step %d: Claim(%q, t0+%v) = %v, want %v", i, st.id, st.at, got, st.want)
		}
	}
}

func TestMemoryStoreBounded(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	s := webhook.NewMemoryStore(3, time.Minute)
	for i := range 5 {
		id := fmt.Sprint("id-", i)
		claim(t, s, id, t0)
		if err := s.Complete(context.Background(), id, t0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Len(); got != 3 {
		t.Errorf("Len() after 5 ids in a store of 3 = %d, want 3", got)
	}
	// The oldest went first: the newest three are still done (a Claim of a
	// done id changes nothing), the oldest is new again.
	for _, id := range []string{"id-4", "id-3", "id-2"} {
		if got := claim(t, s, id, t0); got != webhook.StateDone {
			t.Errorf("Claim(%q) = %v, want %v", id, got, webhook.StateDone)
		}
	}
	if got := claim(t, s, "id-0", t0); got != webhook.StateNew {
		t.Errorf("Claim(%q) = %v, want %v", "id-0", got, webhook.StateNew)
	}
	// Expired ids are swept on the next Claim.
	claim(t, s, "late", t0.Add(time.Minute))
	if got := s.Len(); got != 1 {
		t.Errorf("Len() after everything expired = %d, want 1", got)
	}
}

func TestMemoryStoreConcurrentClaim(t *testing.T) {
	const n = 32
	t0 := time.Unix(1700000000, 0)
	s := webhook.NewMemoryStore(0, 0)
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make(chan webhook.State, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, err := s.Claim(context.Background(), "same", t0)
			if err != nil {
				t.Error(err)
			}
			results <- st
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	count := map[webhook.State]int{}
	for st := range results {
		count[st]++
	}
	if count[webhook.StateNew] != 1 || count[webhook.StateInProgress] != n-1 {
		t.Errorf("%d concurrent Claims = %v, want exactly one new and %d in progress", n, count, n-1)
	}
}
