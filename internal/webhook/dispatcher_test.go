package webhook_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/internal/webhook"
	pkgwebhook "github.com/palisade-auth/palisade/pkg/webhook"
)

func delivered(d store.WebhookDelivery) bool { return d.Status == store.DeliveryDelivered }

func TestDeliverVerifies(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		for _, format := range []string{store.WebhookFormatSeed, store.WebhookFormatStandard} {
			t.Run(format, func(t *testing.T) {
				f := newFixture(t, newDB(t))
				rc := newReceiver(t, ok200)
				e, secret := f.endpoint(t, rc.URL+"/hook", format, "user.logged_in")
				ev := f.event(t, "user.logged_in")
				f.start(t, webhook.Config{})
				d := f.waitDelivery(t, f.delivery(t, e.ID).ID, "the delivery", delivered)
				if d.Attempts != 1 || d.LastStatusCode != 200 || d.LastError != "" || d.NextAttemptAt != nil || d.LeaseUntil != nil {
					t.Errorf("delivery = %+v, want delivered at the first attempt with 200", d)
				}
				got := rc.requests()
				if len(got) != 1 {
					t.Fatalf("receiver got %d requests, want 1", len(got))
				}
				r := got[0]
				var err error
				if format == store.WebhookFormatSeed {
					err = pkgwebhook.Verify([][]byte{[]byte(secret)}, r.header, r.body, f.clock.Now())
				} else {
					key, perr := pkgwebhook.ParseStandardSecret(secret)
					if perr != nil {
						t.Fatal(perr)
					}
					err = pkgwebhook.VerifyStandard([][]byte{key}, r.header, r.body, f.clock.Now())
				}
				if err != nil {
					t.Errorf("verify the delivery = %v, want nil", err)
				}
				for h, want := range map[string]string{
					"Content-Type": "application/json", "User-Agent": "Palisade-Webhooks/1", "Webhook-Id": ev.ID,
					"Webhook-Timestamp": jsonNumber(f.clock.Now().Unix()),
				} {
					if v := r.header.Get(h); v != want {
						t.Errorf("header %s = %q, want %q", h, v, want)
					}
				}
				want := `{"id":"` + ev.ID + `","type":"user.logged_in","created_at":"` + ev.OccurredAt.UTC().Format(time.RFC3339Nano) +
					`","data":{"device_id":"laptop","session_id":"` + ev.SessionID + `","user_id":"` + ev.UserID + `"}}`
				if string(r.body) != want {
					t.Errorf("body =\n\t%s\nwant\n\t%s", r.body, want)
				}
			})
		}
	})
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestRotationOverlap: while the previous secret is in its overlap, the
// seed format signs with it (receivers still hold it) and Standard
// Webhooks signs with both; once it has passed, with the new one.
func TestRotationOverlap(t *testing.T) {
	f := newFixture(t, sqliteURL(t))
	rc := newReceiver(t, ok200)
	seed, seedOld := f.endpoint(t, rc.URL+"/seed", store.WebhookFormatSeed, "user.registered")
	std, stdOld := f.endpoint(t, rc.URL+"/std", store.WebhookFormatStandard, "user.registered")
	newSecrets := map[string]string{seed.ID: "seed-new-secret", std.ID: "whsec_" + strings.Repeat("QUJD", 11)}
	for _, e := range []store.WebhookEndpoint{seed, std} {
		e.PreviousSecret, e.Secret = e.Secret, f.seal(t, e.ID, newSecrets[e.ID])
		e.PreviousUntil = ptr(f.clock.Now().Add(time.Hour))
		if err := f.st.UpdateWebhookEndpoint(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	f.event(t, "user.registered")
	_, _, stop := f.start(t, webhook.Config{})
	for _, e := range []store.WebhookEndpoint{seed, std} {
		f.waitDelivery(t, f.delivery(t, e.ID).ID, "the delivery to "+e.Format, delivered)
	}
	stop()
	verify := func(format, secret string, r request) error {
		if format == store.WebhookFormatSeed {
			return pkgwebhook.Verify([][]byte{[]byte(secret)}, r.header, r.body, f.clock.Now())
		}
		key, err := pkgwebhook.ParseStandardSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		return pkgwebhook.VerifyStandard([][]byte{key}, r.header, r.body, f.clock.Now())
	}
	got := rc.requests()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(got))
	}
	for _, r := range got {
		isSeed := r.header.Get("Webhook-Signature") != "" && !strings.HasPrefix(r.header.Get("Webhook-Signature"), "v1,")
		if isSeed {
			if err := verify(store.WebhookFormatSeed, seedOld, r); err != nil {
				t.Errorf("seed delivery in the overlap, verified with the previous secret = %v, want nil", err)
			}
			if err := verify(store.WebhookFormatSeed, newSecrets[seed.ID], r); err == nil {
				t.Errorf("seed delivery in the overlap verified with the new secret, want the previous one only")
			}
			continue
		}
		for _, s := range []string{stdOld, newSecrets[std.ID]} {
			if err := verify(store.WebhookFormatStandard, s, r); err != nil {
				t.Errorf("standard delivery in the overlap, verified with each secret = %v, want nil", err)
			}
		}
	}
}

func TestRetries(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		for _, tc := range []struct {
			name   string
			first  func(w http.ResponseWriter, r *http.Request)
			status int
			errHas string
		}{
			{"500", func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "database\x00 on fire", http.StatusInternalServerError)
			}, 500, "500 Internal Server Error: database on fire"},
			{"timeout", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, 0, "no answer within"},
			{"redirect", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			}, 302, "302 Found: redirects are not followed"},
			{"404", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }, 404, "404 Not Found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newFixture(t, newDB(t))
				rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
					if n == 1 {
						tc.first(w, r)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				})
				e, _ := f.endpoint(t, rc.URL, store.WebhookFormatSeed, "*")
				ev := f.event(t, "user.registered")
				id := f.delivery(t, e.ID).ID
				const backoff = 30 * time.Second
				d, reg, stop := f.start(t, webhook.Config{Timeout: 500 * time.Millisecond, RetryBackoff: backoff})
				first := f.waitDelivery(t, id, "the first attempt", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
				now := f.clock.Now()
				if first.Status != store.DeliveryPending || first.LastStatusCode != tc.status || !strings.Contains(first.LastError, tc.errHas) ||
					first.NextAttemptAt == nil || first.NextAttemptAt.Before(now.Add(time.Second)) || first.NextAttemptAt.After(now.Add(backoff)) {
					t.Fatalf("after a failed attempt: %+v; want pending, status %d, error containing %q, next attempt within [1s, %v]",
						first, tc.status, tc.errHas, backoff)
				}
				f.clock.Set(*first.NextAttemptAt)
				d.Wake()
				second := f.waitDelivery(t, id, "the retry", delivered)
				stop() // the metrics and logs of the attempts are written
				if second.Attempts != 2 || second.LastStatusCode != 204 {
					t.Errorf("after the retry: %+v, want delivered at attempt 2 with 204", second)
				}
				got := rc.requests()
				if len(got) != 2 || got[0].header.Get("Webhook-Id") != ev.ID || got[1].header.Get("Webhook-Id") != ev.ID ||
					string(got[0].body) != string(got[1].body) {
					t.Errorf("receiver got %d requests; want 2 with the same event id %s and body", len(got), ev.ID)
				}
				if n := counter(t, reg, "issuer_webhook_deliveries_total", "retry"); n != 1 {
					t.Errorf("deliveries{outcome=retry} = %v, want 1", n)
				}
				if n := counter(t, reg, "issuer_webhook_deliveries_total", "delivered"); n != 1 {
					t.Errorf("deliveries{outcome=delivered} = %v, want 1", n)
				}
				logs := f.logs.String()
				for _, want := range []string{"endpoint_id=" + e.ID, "delivery_id=" + id, "event_type=user.registered", "status_code=" + jsonNumber(int64(tc.status))} {
					if !strings.Contains(logs, want) {
						t.Errorf("logs lack %q:\n%s", want, logs)
					}
				}
				if strings.Contains(logs, ev.UserID) || strings.Contains(logs, "seed-secret-") {
					t.Errorf("logs hold the body or the secret:\n%s", logs)
				}
			})
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name   string
		status int
		header string
		want   time.Duration
	}{
		{"503 seconds", http.StatusServiceUnavailable, "120", 120 * time.Second},
		{"429 date", http.StatusTooManyRequests, now.Add(300 * time.Second).UTC().Format(http.TimeFormat), 300 * time.Second},
		{"429 bounded", http.StatusTooManyRequests, "9999999", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, sqliteURL(t))
			f.clock.Set(now)
			rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", tc.header)
				w.WriteHeader(tc.status)
			})
			e, _ := f.endpoint(t, rc.URL, store.WebhookFormatSeed, "user.enabled")
			f.event(t, "user.enabled")
			id := f.delivery(t, e.ID).ID
			_, _, stop := f.start(t, webhook.Config{MaxRetryAfter: time.Hour})
			d := f.waitDelivery(t, id, "the attempt", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
			stop()
			if d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(now.Add(tc.want)) || d.LastStatusCode != tc.status {
				t.Errorf("after %d with Retry-After %q: next attempt %v, status %d; want %v", tc.status, tc.header, d.NextAttemptAt, d.LastStatusCode, now.Add(tc.want))
			}
		})
	}
}

func TestFailedAfterMaxAttempts(t *testing.T) {
	forEachDB(t, func(t *testing.T, newDB func(testing.TB) string) {
		f := newFixture(t, newDB(t))
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadGateway) })
		e, _ := f.endpoint(t, rc.URL, store.WebhookFormatStandard, "*")
		ev := f.event(t, "password.changed")
		id := f.delivery(t, e.ID).ID
		const attempts = 3
		d, reg, stop := f.start(t, webhook.Config{MaxAttempts: attempts})
		for n := 1; n < attempts; n++ {
			got := f.waitDelivery(t, id, "an attempt", func(d store.WebhookDelivery) bool { return d.Attempts == n })
			if got.Status != store.DeliveryPending {
				t.Fatalf("after attempt %d: status %s, want pending", n, got.Status)
			}
			f.clock.Set(*got.NextAttemptAt)
			d.Wake()
		}
		got := f.waitDelivery(t, id, "the last attempt", func(d store.WebhookDelivery) bool { return d.Attempts == attempts })
		stop() // the metrics of the last attempt are written
		if got.Status != store.DeliveryFailed || got.NextAttemptAt != nil || got.LastStatusCode != 502 {
			t.Errorf("after the last attempt: %+v, want failed with 502 and no next attempt", got)
		}
		reqs := rc.requests()
		if len(reqs) != attempts {
			t.Errorf("receiver got %d requests, want %d", len(reqs), attempts)
		}
		for _, r := range reqs {
			if r.header.Get("Webhook-Id") != ev.ID {
				t.Errorf("webhook-id = %q, want the event id %s on every attempt", r.header.Get("Webhook-Id"), ev.ID)
			}
		}
		for outcome, want := range map[string]float64{"retry": attempts - 1, "failed": 1, "delivered": 0} {
			if n := counter(t, reg, "issuer_webhook_deliveries_total", outcome); n != want {
				t.Errorf("deliveries{outcome=%s} = %v, want %v", outcome, n, want)
			}
		}
		if n := counter(t, reg, "issuer_webhook_attempts_total", ""); n != attempts {
			t.Errorf("attempts = %v, want %d", n, attempts)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func sqliteURL(t *testing.T) string { return testdb.SQLite(t) }

func newPostgres(t *testing.T) string { return testdb.Postgres(t) }
