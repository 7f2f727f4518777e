package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/netguard"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/internal/webhook"
	pkgwebhook "github.com/palisade-auth/palisade/pkg/webhook"
)

// forEachDB runs fn on each database; newDB makes a fresh, empty one.
func forEachDB(t *testing.T, fn func(t *testing.T, newDB func(testing.TB) string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, testdb.SQLite) })
	t.Run("postgres", func(t *testing.T) { fn(t, testdb.Postgres) })
}

// fixture is a database, a sealer and a clock that dispatchers share.
type fixture struct {
	st     *sqlstore.Store
	sealer *keys.Sealer
	clock  *clocktest.Clock
	logs   *syncBuffer
}

func newFixture(t *testing.T, dbURL string) *fixture {
	t.Helper()
	kek := make([]byte, keys.KEKSize)
	if _, err := rand.Read(kek); err != nil {
		t.Fatal(err)
	}
	sealer, err := keys.NewSealer(kek, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: testdb.Store(t, dbURL), sealer: sealer,
		clock: clocktest.New(time.Now().UTC().Truncate(time.Second)), logs: &syncBuffer{}}
}

// client is the SSRF-safe client, admitting the loopback receivers.
func client(timeout time.Duration) *http.Client {
	g := netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	return g.Client(timeout)
}

// start runs a dispatcher until the test ends, or until the returned stop
// is called (which returns once Run has).
func (f *fixture) start(t *testing.T, cfg webhook.Config) (d *webhook.Dispatcher, reg *prometheus.Registry, stop func()) {
	t.Helper()
	reg = prometheus.NewRegistry()
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = time.Minute
	}
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	d, err := webhook.New(f.st, f.sealer, client(cfg.Timeout), cfg, log, reg, f.clock.Now, rand.Reader)
	if err != nil {
		t.Fatalf("webhook.New = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		d.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-stopped
		})
	}
	t.Cleanup(stop)
	return d, reg, stop
}

// endpoint registers an enabled endpoint at url, subscribed to events, and
// returns it with its secret as shown.
func (f *fixture) endpoint(t *testing.T, url, format string, events ...string) (store.WebhookEndpoint, string) {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	secret := "seed-secret-" + uuid.NewString()
	if format == store.WebhookFormatStandard {
		var err error
		if secret, err = pkgwebhook.NewStandardSecret(rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	e := store.WebhookEndpoint{ID: id, URL: url, Events: events, Format: format, Status: store.WebhookEnabled,
		Secret: f.seal(t, id, secret), CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if err := f.st.CreateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("CreateWebhookEndpoint = %v", err)
	}
	return e, secret
}

func (f *fixture) seal(t *testing.T, endpointID, secret string) []byte {
	t.Helper()
	sealed, err := f.sealer.Seal([]byte(secret), auth.WebhookSealContext(endpointID))
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// event appends an audit entry of typ now; the store queues its deliveries.
func (f *fixture) event(t *testing.T, typ string) store.AuditEvent {
	t.Helper()
	e := store.AuditEvent{
		ID: uuid.Must(uuid.NewV7()).String(), Type: typ, OccurredAt: f.clock.Now(),
		UserID: uuid.NewString(), SessionID: uuid.NewString(), IP: "192.0.2.7", UserAgent: "agent/1.0",
		RequestID: "req-1", Data: []byte(`{"device_id":"laptop","email":"ada@example.com"}`),
	}
	if err := f.st.AppendAudit(t.Context(), e); err != nil {
		t.Fatalf("AppendAudit = %v", err)
	}
	return e
}

// delivery returns the one delivery of an endpoint.
func (f *fixture) delivery(t *testing.T, endpointID string) store.WebhookDelivery {
	t.Helper()
	ds, err := f.st.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: endpointID})
	if err != nil || len(ds) != 1 {
		t.Fatalf("ListWebhookDeliveries(%s) = %d deliveries, %v; want 1", endpointID, len(ds), err)
	}
	return ds[0]
}

// waitDelivery polls until the delivery satisfies ok, or fails the test
// after a deadline.
func (f *fixture) waitDelivery(t *testing.T, id string, what string, ok func(store.WebhookDelivery) bool) store.WebhookDelivery {
	t.Helper()
	var d store.WebhookDelivery
	waitFor(t, what, func() bool {
		var err error
		d, err = f.st.WebhookDeliveryByID(context.Background(), id)
		return err == nil && ok(d)
	})
	return d
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// request is one delivery as a receiver got it.
type request struct {
	header http.Header
	body   []byte
}

// receiver is a webhook receiver on loopback; answer decides each answer
// (n counts the requests, from 1).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []request
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, request{header: r.Header.Clone(), body: buf.Bytes()})
		n := len(rc.got)
		rc.mu.Unlock()
		rc.answer(w, r, n)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

func ok200(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// counter reads a counter of reg, by its outcome label when not "".
func counter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := outcome == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					match = true
				}
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
