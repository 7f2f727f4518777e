package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// claim claims deliveries that must be claimable without error.
func claim(t *testing.T, q store.Queries, now time.Time, limit, perEndpoint int, lease time.Duration) []store.ClaimedDelivery {
	t.Helper()
	got, err := q.ClaimWebhookDeliveries(t.Context(), now, limit, perEndpoint, lease)
	if err != nil {
		t.Fatalf("ClaimWebhookDeliveries(%v, %d, %d, %v) = %v, want nil", now, limit, perEndpoint, lease, err)
	}
	return got
}

// claimedIDs are the delivery ids of cs, in order.
func claimedIDs(cs []store.ClaimedDelivery) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Delivery.ID)
	}
	return out
}

func testWebhookClaim(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"*"}, func(e *store.WebhookEndpoint) {
		e.Format, e.PreviousSecret, e.PreviousUntil = store.WebhookFormatStandard, []byte("sealed-old"), ptr(at(time.Hour))
	})
	older := newEvent(t, s, "user.registered", at(-2*time.Minute))
	newer := newEvent(t, s, "user.logged_in", at(-time.Minute))
	future := newEvent(t, s, "user.logged_out", at(time.Minute)) // not due yet

	got := claim(t, s, t0, 10, 10, time.Minute)
	if len(got) != 2 {
		t.Fatalf("ClaimWebhookDeliveries = %d deliveries, want 2 (the due ones)", len(got))
	}
	for i, ev := range []store.AuditEvent{older, newer} { // oldest due first
		c := got[i]
		if c.Delivery.EventID != ev.ID || c.Delivery.EndpointID != e.ID || c.Delivery.Status != store.DeliveryPending ||
			c.Delivery.LeaseUntil == nil || !sameTime(*c.Delivery.LeaseUntil, at(time.Minute)) {
			t.Errorf("claimed[%d].Delivery = %+v, want event %s leased until %v", i, c.Delivery, ev.ID, at(time.Minute))
		}
		if !sameEndpoint(c.Endpoint, e) {
			t.Errorf("claimed[%d].Endpoint = %+v, want %+v", i, c.Endpoint, e)
		}
		checkSame(t, "claimed.Event", c.Event, ev)
	}
	if again := claim(t, s, t0, 10, 10, time.Minute); len(again) != 0 {
		t.Errorf("ClaimWebhookDeliveries while leased = %v, want none", claimedIDs(again))
	}
	later := claim(t, s, at(time.Minute), 10, 10, time.Minute) // the leases lapse as the future one falls due
	if want := 3; len(later) != want || later[2].Delivery.EventID != future.ID {
		t.Errorf("ClaimWebhookDeliveries after the lease = %v, want %d ending with the event %s", claimedIDs(later), want, future.ID)
	}
	if got := claim(t, s, t0, 0, 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimWebhookDeliveries(limit 0) = %d, want none", len(got))
	}
}

func testWebhookClaimLeaseExpires(t *testing.T, s store.Store) {
	newEndpoint(t, s, []string{"*"})
	newEvent(t, s, "user.registered", t0)
	first := claim(t, s, t0, 10, 10, time.Minute)
	if len(first) != 1 {
		t.Fatalf("ClaimWebhookDeliveries = %d, want 1", len(first))
	}
	// The dispatcher that claimed it crashed: nothing until the lease
	// lapses, then it is claimed again.
	if got := claim(t, s, at(time.Minute-time.Microsecond), 10, 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimWebhookDeliveries before the lease lapses = %v, want none", claimedIDs(got))
	}
	got := claim(t, s, at(time.Minute), 10, 10, time.Minute)
	if len(got) != 1 || got[0].Delivery.ID != first[0].Delivery.ID || !sameTime(*got[0].Delivery.LeaseUntil, at(2*time.Minute)) {
		t.Errorf("ClaimWebhookDeliveries when the lease lapsed = %+v, want %s leased until %v", got, first[0].Delivery.ID, at(2*time.Minute))
	}
}

func testWebhookClaimPerEndpoint(t *testing.T, s store.Store) {
	dead := newEndpoint(t, s, []string{"user.registered"})
	healthy := newEndpoint(t, s, []string{"user.logged_in"})
	for i := range 6 {
		newEvent(t, s, "user.registered", at(time.Duration(i-10)*time.Minute))
	}
	ok := newEvent(t, s, "user.logged_in", t0) // due last
	got := claim(t, s, t0, 3, 2, time.Minute)
	count := map[string]int{}
	for _, c := range got {
		count[c.Delivery.EndpointID]++
	}
	if len(got) != 3 || count[dead.ID] != 2 || count[healthy.ID] != 1 {
		t.Fatalf("ClaimWebhookDeliveries(limit 3, per endpoint 2) = %v per endpoint, want 2 of the busy one and 1 of the other", count)
	}
	// The busy endpoint holds two leases: the cap counts them.
	if more := claim(t, s, t0, 10, 2, time.Minute); len(more) != 0 {
		t.Errorf("ClaimWebhookDeliveries while the busy endpoint holds its cap = %v, want none", claimedIDs(more))
	}
	// One attempt recorded frees one place.
	recordAttempt(t, s, got[0].Delivery.ID, store.WebhookAttempt{At: t0, Error: "timeout", Status: store.DeliveryPending, NextAttemptAt: at(time.Hour)})
	if more := claim(t, s, t0, 10, 2, time.Minute); len(more) != 1 || more[0].Delivery.EndpointID != dead.ID {
		t.Errorf("ClaimWebhookDeliveries after one attempt = %v, want one more of the busy endpoint", claimedIDs(more))
	}
	_ = ok
}

func testWebhookClaimSkipsDisabled(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"*"})
	newEvent(t, s, "user.registered", t0)
	e.Status = store.WebhookDisabled
	if err := s.UpdateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("UpdateWebhookEndpoint = %v", err)
	}
	if got := claim(t, s, t0, 10, 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimWebhookDeliveries of a disabled endpoint = %v, want none", claimedIDs(got))
	}
	e.Status = store.WebhookEnabled
	if err := s.UpdateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("UpdateWebhookEndpoint = %v", err)
	}
	if got := claim(t, s, t0, 10, 10, time.Minute); len(got) != 1 {
		t.Errorf("ClaimWebhookDeliveries once enabled again = %d, want 1", len(got))
	}
}

// testWebhookClaimConcurrent races claimers the way the dispatchers of
// several replicas do: no delivery is leased by two of them.
func testWebhookClaimConcurrent(t *testing.T, s store.Store) {
	const endpoints, events, claimers = 3, 20, 8
	for range endpoints {
		newEndpoint(t, s, []string{"*"})
	}
	for i := range events {
		newEvent(t, s, "user.logged_in", at(time.Duration(i-events)*time.Second))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				got, err := s.ClaimWebhookDeliveries(t.Context(), t0, 4, 100, time.Minute)
				if err != nil {
					t.Errorf("ClaimWebhookDeliveries = %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.Delivery.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	var twice []string
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 || len(seen) != endpoints*events {
		t.Errorf("concurrent claims leased %d distinct deliveries, %d of them more than once; want %d, each once", len(seen), len(twice), endpoints*events)
	}
}

func testWebhookRecordAttempt(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"*"})
	for range 3 {
		newEvent(t, s, "user.registered", t0)
	}
	cs := claim(t, s, t0, 10, 10, time.Minute)
	if len(cs) != 3 {
		t.Fatalf("ClaimWebhookDeliveries = %d, want 3", len(cs))
	}
	retry, ok, fail := cs[0].Delivery.ID, cs[1].Delivery.ID, cs[2].Delivery.ID
	recordAttempt(t, s, retry, store.WebhookAttempt{At: at(time.Second), StatusCode: 500, Error: "500 Internal Server Error: boom",
		Status: store.DeliveryPending, NextAttemptAt: at(30 * time.Second)})
	recordAttempt(t, s, ok, store.WebhookAttempt{At: at(time.Second), StatusCode: 204, Status: store.DeliveryDelivered})
	recordAttempt(t, s, fail, store.WebhookAttempt{At: at(time.Second), Error: "dial: connection refused", Status: store.DeliveryFailed})
	for _, tc := range []struct {
		id     string
		status string
		next   *time.Time
		code   int
		err    string
	}{
		{retry, store.DeliveryPending, ptr(at(30 * time.Second)), 500, "500 Internal Server Error: boom"},
		{ok, store.DeliveryDelivered, nil, 204, ""},
		{fail, store.DeliveryFailed, nil, 0, "dial: connection refused"},
	} {
		d, err := s.WebhookDeliveryByID(t.Context(), tc.id)
		if err != nil || d.Status != tc.status || d.Attempts != 1 || d.LeaseUntil != nil || d.LastAttemptAt == nil ||
			!sameTime(*d.LastAttemptAt, at(time.Second)) || d.LastStatusCode != tc.code || d.LastError != tc.err ||
			(d.NextAttemptAt == nil) != (tc.next == nil) || (tc.next != nil && !sameTime(*d.NextAttemptAt, *tc.next)) || d.EndpointID != e.ID {
			t.Errorf("WebhookDeliveryByID(%s) = %+v, %v, want %s, 1 attempt, status code %d, error %q, next %v", tc.id, d, err, tc.status, tc.code, tc.err, tc.next)
		}
	}
	if got := claim(t, s, at(30*time.Second-time.Microsecond), 10, 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimWebhookDeliveries before the retry is due = %v, want none", claimedIDs(got))
	}
	if got := claim(t, s, at(30*time.Second), 10, 10, time.Minute); !slices.Equal(claimedIDs(got), []string{retry}) {
		t.Errorf("ClaimWebhookDeliveries when the retry is due = %v, want [%s]", claimedIDs(got), retry)
	}
	// A finished delivery keeps its outcome.
	err := s.RecordWebhookAttempt(t.Context(), ok, store.WebhookAttempt{At: at(time.Minute), Error: "late", Status: store.DeliveryFailed})
	wantErr(t, "RecordWebhookAttempt(delivered)", err, store.ErrNotFound)
	if d, _ := s.WebhookDeliveryByID(t.Context(), ok); d.Status != store.DeliveryDelivered {
		t.Errorf("status after a late attempt = %s, want delivered", d.Status)
	}
	err = s.RecordWebhookAttempt(t.Context(), newID(t), store.WebhookAttempt{At: t0, Status: store.DeliveryDelivered})
	wantErr(t, "RecordWebhookAttempt(unknown)", err, store.ErrNotFound)
}

func testWebhookRetry(t *testing.T, s store.Store) {
	newEndpoint(t, s, []string{"*"})
	newEvent(t, s, "user.registered", t0)
	cs := claim(t, s, t0, 10, 10, time.Minute)
	if len(cs) != 1 {
		t.Fatalf("ClaimWebhookDeliveries = %d, want 1", len(cs))
	}
	id := cs[0].Delivery.ID
	recordAttempt(t, s, id, store.WebhookAttempt{At: t0, StatusCode: 410, Error: "410 Gone", Status: store.DeliveryFailed})
	wantErr(t, "RetryWebhookDelivery", s.RetryWebhookDelivery(t.Context(), id, at(time.Hour)), nil)
	d, err := s.WebhookDeliveryByID(t.Context(), id)
	if err != nil || d.Status != store.DeliveryPending || d.NextAttemptAt == nil || !sameTime(*d.NextAttemptAt, at(time.Hour)) || d.LeaseUntil != nil || d.Attempts != 1 {
		t.Errorf("WebhookDeliveryByID after retry = %+v, %v, want pending due at %v, no lease, the attempt kept", d, err, at(time.Hour))
	}
	if got := claim(t, s, at(time.Hour), 10, 10, time.Minute); !slices.Equal(claimedIDs(got), []string{id}) {
		t.Errorf("ClaimWebhookDeliveries after retry = %v, want [%s]", claimedIDs(got), id)
	}
	// A leased one: the lease is cleared.
	wantErr(t, "RetryWebhookDelivery(leased)", s.RetryWebhookDelivery(t.Context(), id, at(time.Hour)), nil)
	if got := claim(t, s, at(time.Hour), 10, 10, time.Minute); len(got) != 1 {
		t.Errorf("ClaimWebhookDeliveries after retry of a leased delivery = %d, want 1", len(got))
	}
	wantErr(t, "RetryWebhookDelivery(unknown)", s.RetryWebhookDelivery(t.Context(), newID(t), t0), store.ErrNotFound)
}

func testWebhookRelease(t *testing.T, s store.Store) {
	newEndpoint(t, s, []string{"*"})
	newEvent(t, s, "user.registered", t0)
	cs := claim(t, s, t0, 10, 10, time.Hour)
	if len(cs) != 1 {
		t.Fatalf("ClaimWebhookDeliveries = %d, want 1", len(cs))
	}
	id := cs[0].Delivery.ID
	wantErr(t, "ReleaseWebhookDelivery", s.ReleaseWebhookDelivery(t.Context(), id), nil)
	d, err := s.WebhookDeliveryByID(t.Context(), id)
	if err != nil || d.LeaseUntil != nil || d.Attempts != 0 || d.Status != store.DeliveryPending {
		t.Errorf("WebhookDeliveryByID after release = %+v, %v, want pending, untried, no lease", d, err)
	}
	if got := claim(t, s, t0, 10, 10, time.Hour); !slices.Equal(claimedIDs(got), []string{id}) {
		t.Errorf("ClaimWebhookDeliveries after release = %v, want [%s]", claimedIDs(got), id)
	}
	recordAttempt(t, s, id, store.WebhookAttempt{At: t0, StatusCode: 200, Status: store.DeliveryDelivered})
	wantErr(t, "ReleaseWebhookDelivery(delivered)", s.ReleaseWebhookDelivery(t.Context(), id), store.ErrNotFound)
	wantErr(t, "ReleaseWebhookDelivery(unknown)", s.ReleaseWebhookDelivery(t.Context(), newID(t)), store.ErrNotFound)
}

func testWebhookPrune(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"*"})
	for _, d := range []time.Duration{-3 * time.Hour, -3 * time.Hour, -3 * time.Hour, -time.Hour} {
		newEvent(t, s, "user.registered", at(d))
	}
	cs := claim(t, s, t0, 10, 10, time.Minute) // oldest first
	if len(cs) != 4 {
		t.Fatalf("ClaimWebhookDeliveries = %d, want 4", len(cs))
	}
	recordAttempt(t, s, cs[0].Delivery.ID, store.WebhookAttempt{At: t0, StatusCode: 200, Status: store.DeliveryDelivered})
	recordAttempt(t, s, cs[1].Delivery.ID, store.WebhookAttempt{At: t0, Error: "x", Status: store.DeliveryFailed})
	recordAttempt(t, s, cs[2].Delivery.ID, store.WebhookAttempt{At: t0, Error: "x", Status: store.DeliveryPending, NextAttemptAt: at(time.Hour)})
	recordAttempt(t, s, cs[3].Delivery.ID, store.WebhookAttempt{At: t0, StatusCode: 200, Status: store.DeliveryDelivered})
	n, err := s.PruneWebhookDeliveries(t.Context(), at(-2*time.Hour))
	if err != nil || n != 2 {
		t.Errorf("PruneWebhookDeliveries = %d, %v, want 2 (the old finished ones)", n, err)
	}
	left := map[string]bool{}
	for _, d := range deliveriesOf(t, s, e.ID) {
		left[d.ID] = true
	}
	if len(left) != 2 || !left[cs[2].Delivery.ID] || !left[cs[3].Delivery.ID] {
		t.Errorf("deliveries left after pruning = %v, want the pending one and the recent one", left)
	}
}

func testWebhookOldestPending(t *testing.T, s store.Store) {
	oldest, err := s.OldestPendingWebhookDelivery(t.Context())
	if err != nil || oldest != nil {
		t.Fatalf("OldestPendingWebhookDelivery(empty) = %v, %v, want nil, nil", oldest, err)
	}
	off := newEndpoint(t, s, []string{"user.registered"})
	newEndpoint(t, s, []string{"user.logged_in"})
	newEvent(t, s, "user.registered", at(-time.Hour)) // for the endpoint about to be disabled
	newEvent(t, s, "user.logged_in", at(-time.Minute))
	newEvent(t, s, "user.logged_in", at(-2*time.Minute))
	off.Status = store.WebhookDisabled
	if err := s.UpdateWebhookEndpoint(t.Context(), off); err != nil {
		t.Fatalf("UpdateWebhookEndpoint = %v", err)
	}
	oldest, err = s.OldestPendingWebhookDelivery(t.Context())
	if err != nil || oldest == nil || !sameTime(*oldest, at(-2*time.Minute)) {
		t.Errorf("OldestPendingWebhookDelivery = %v, %v, want %v (a disabled endpoint's deliveries wait, uncounted)", oldest, err, at(-2*time.Minute))
	}
	for _, c := range claim(t, s, t0, 10, 10, time.Minute) {
		recordAttempt(t, s, c.Delivery.ID, store.WebhookAttempt{At: t0, StatusCode: 200, Status: store.DeliveryDelivered})
	}
	oldest, err = s.OldestPendingWebhookDelivery(t.Context())
	if err != nil || oldest != nil {
		t.Errorf("OldestPendingWebhookDelivery(all delivered) = %v, %v, want nil, nil", oldest, err)
	}
}
