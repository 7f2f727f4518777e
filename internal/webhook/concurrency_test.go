package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/webhook"
)

// TestDeadEndpointDoesNotDelayHealthy: an endpoint that never answers
// holds at most its per-endpoint share of the slots, while a healthy
// endpoint's delivery, due after all of the dead one's, goes out; at
// shutdown past the grace, the hanging deliveries are released untried.
func TestDeadEndpointDoesNotDelayHealthy(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		f := newFixture(t, newDB(t))
		hang := make(chan struct{})
		dead := newReceiver(t, func(http.ResponseWriter, *http.Request, int) { <-hang })
		t.Cleanup(func() { close(hang) }) // before the server closes
		healthy := newReceiver(t, ok200)
		deadEP, _ := f.endpoint(t, dead.URL, store.WebhookFormatSeed, "login.failed")
		okEP, _ := f.endpoint(t, healthy.URL, store.WebhookFormatSeed, "user.logged_in")
		for range 10 {
			f.event(t, "login.failed")
		}
		f.clock.Advance(time.Second) // the healthy one is due last
		f.event(t, "user.logged_in")

		const perEndpoint = 2
		_, reg, stop := f.start(t, webhook.Config{Timeout: time.Minute, MaxInFlight: 3, MaxInFlightPerEndpoint: perEndpoint,
			ShutdownGrace: 10 * time.Millisecond})
		f.waitDelivery(t, f.delivery(t, okEP.ID).ID, "the healthy endpoint's delivery", delivered)
		waitFor(t, "the dead endpoint's requests", func() bool { return len(dead.requests()) == perEndpoint })

		stop() // the dead endpoint's deliveries are still hanging
		if n := len(dead.requests()); n != perEndpoint {
			t.Errorf("the dead endpoint got %d requests, want %d (its cap)", n, perEndpoint)
		}
		ds, err := f.st.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: deadEP.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Status != store.DeliveryPending || d.Attempts != 0 || d.LeaseUntil != nil {
				t.Errorf("after shutdown, dead endpoint's delivery = %+v; want pending, untried, released", d)
			}
		}
		if n := counter(t, reg, "issuer_webhook_attempts_total", ""); n != 1 {
			t.Errorf("attempts recorded = %v, want 1 (the released ones are not attempts)", n)
		}
	})
}

// TestShutdownWaitsForInFlight: Run returns only once a delivery in flight
// has finished and been recorded.
func TestShutdownWaitsForInFlight(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		f := newFixture(t, newDB(t))
		started, finish := make(chan struct{}), make(chan struct{})
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			close(started)
			<-finish
			w.WriteHeader(http.StatusOK)
		})
		e, _ := f.endpoint(t, rc.URL, store.WebhookFormatSeed, "*")
		f.event(t, "user.registered")
		id := f.delivery(t, e.ID).ID
		_, _, stop := f.start(t, webhook.Config{ShutdownGrace: time.Minute})
		<-started
		stopped := make(chan struct{})
		go func() {
			stop()
			close(stopped)
		}()
		// Run is waiting for the delivery; let it finish.
		close(finish)
		<-stopped
		d, err := f.st.WebhookDeliveryByID(t.Context(), id)
		if err != nil || d.Status != store.DeliveryDelivered || d.Attempts != 1 {
			t.Errorf("after shutdown: %+v, %v; want delivered by the attempt in flight", d, err)
		}
	})
}

// TestTwoDispatchersDeliverOnce: two dispatchers (two replicas) on one
// PostgreSQL deliver every event exactly once while both run.
func TestTwoDispatchersDeliverOnce(t *testing.T) {
	f := newFixture(t, newPostgres(t))
	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		seen[r.Header.Get("Webhook-Id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	e1, _ := f.endpoint(t, rc.URL+"/a", store.WebhookFormatSeed, "*")
	e2, _ := f.endpoint(t, rc.URL+"/b", store.WebhookFormatStandard, "*")
	const events = 40
	for range events {
		f.event(t, "refresh_token.used")
	}
	cfg := webhook.Config{MaxInFlight: 4, MaxInFlightPerEndpoint: 4}
	d1, _, _ := f.start(t, cfg)
	d2, _, _ := f.start(t, cfg)
	d1.Wake()
	d2.Wake()
	waitFor(t, "every delivery", func() bool {
		n := 0
		for _, id := range []string{e1.ID, e2.ID} {
			ds, err := f.st.ListWebhookDeliveries(context.Background(), store.WebhookDeliveryFilter{EndpointID: id, Status: store.DeliveryDelivered})
			if err != nil {
				t.Fatal(err)
			}
			n += len(ds)
		}
		return n == 2*events
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != events {
		t.Errorf("receiver saw %d event ids, want %d", len(seen), events)
	}
	for id, n := range seen {
		if n != 2 { // one per endpoint
			t.Errorf("event %s received %d times, want 2 (once per endpoint)", id, n)
		}
	}
}

// TestPruneAndOldestPending: finished deliveries older than the retention
// go; the gauge shows the age of the oldest pending delivery.
func TestPruneAndOldestPending(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		f := newFixture(t, newDB(t))
		hang := make(chan struct{})
		rc := newReceiver(t, func(http.ResponseWriter, *http.Request, int) { <-hang })
		t.Cleanup(func() { close(hang) })
		e, _ := f.endpoint(t, rc.URL, store.WebhookFormatSeed, "*")
		const retention = 24 * time.Hour
		start := f.clock.Now()
		f.clock.Set(start.Add(-retention - time.Hour))
		f.event(t, "user.registered") // old, delivered: pruned
		f.clock.Set(start.Add(-retention + time.Hour))
		f.event(t, "user.registered") // recent enough, delivered: kept
		f.clock.Set(start.Add(-2 * time.Hour))
		f.event(t, "user.enabled") // pending for two hours
		f.clock.Set(start)
		ds, err := f.st.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: e.ID})
		if err != nil || len(ds) != 3 {
			t.Fatalf("deliveries = %d, %v", len(ds), err)
		}
		pending := ds[0] // newest first
		claimed, err := f.st.ClaimWebhookDeliveries(t.Context(), start, 10, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claimed {
			a := store.WebhookAttempt{At: start, StatusCode: 200, Status: store.DeliveryDelivered}
			if c.Delivery.ID == pending.ID {
				a = store.WebhookAttempt{At: start, Error: "x", Status: store.DeliveryPending, NextAttemptAt: start.Add(time.Hour)}
			}
			if err := f.st.RecordWebhookAttempt(t.Context(), c.Delivery.ID, a); err != nil {
				t.Fatal(err)
			}
		}
		_, reg, stop := f.start(t, webhook.Config{Retention: retention})
		waitFor(t, "the old delivery to be pruned", func() bool {
			_, err := f.st.WebhookDeliveryByID(context.Background(), ds[2].ID)
			return errors.Is(err, store.ErrNotFound)
		})
		waitFor(t, "the oldest-pending gauge", func() bool { return gauge(t, reg, "issuer_webhook_oldest_pending_age_seconds") == 7200 })
		stop()
		for _, d := range ds[:2] {
			if _, err := f.st.WebhookDeliveryByID(t.Context(), d.ID); err != nil {
				t.Errorf("WebhookDeliveryByID(%s, kept) = %v, want nil", d.ID, err)
			}
		}
	})
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
