// Package webhook owns the delivery of outbound webhooks (API.md section 5):
// a Dispatcher leases due deliveries from the outbox the store fills in the
// transaction of each audited change, sends them signed to their endpoints
// with a bounded number in flight, records each attempt, retries failures
// with jittered exponential backoff, and prunes finished deliveries.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/store"
)

// Store is the part of the store the dispatcher uses: the outbox.
type Store interface {
	ClaimWebhookDeliveries(ctx context.Context, now time.Time, limit, perEndpoint int, lease time.Duration) ([]store.ClaimedDelivery, error)
	RecordWebhookAttempt(ctx context.Context, id string, a store.WebhookAttempt) error
	ReleaseWebhookDelivery(ctx context.Context, id string) error
	PruneWebhookDeliveries(ctx context.Context, before time.Time) (int, error)
	OldestPendingWebhookDelivery(ctx context.Context) (*time.Time, error)
}

// Opener opens an endpoint's sealed secrets (keys.Sealer), sealed to
// auth.WebhookSealContext of the endpoint's id.
type Opener interface {
	Open(sealed []byte, context string) ([]byte, error)
}

// UserAgent is the User-Agent of every delivery.
const UserAgent = "Palisade-Webhooks/1"

// Config tunes the dispatcher. Zero fields take the defaults below.
type Config struct {
	// Timeout bounds one attempt, from dial to the end of the response
	// (--webhook-timeout): only a 2xx within it is a success.
	Timeout time.Duration
	// RetryBackoff is the ceiling of the wait after the first failed
	// attempt (--webhook-retry-backoff); it doubles with every further
	// failure, up to MaxBackoff. The wait is drawn uniformly below the
	// ceiling (full jitter), and is at least a second.
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// MaxAttempts bounds the attempts of one delivery
	// (--webhook-max-attempts); after the last failure it is failed.
	MaxAttempts int
	// MaxRetryAfter bounds the wait a 429 or 503 answer's Retry-After
	// asks for.
	MaxRetryAfter time.Duration
	// MaxInFlight bounds the deliveries this dispatcher sends at once;
	// MaxInFlightPerEndpoint those of one endpoint, across every replica
	// (the store counts the leases held), so a slow or dead endpoint never
	// takes every slot.
	MaxInFlight            int
	MaxInFlightPerEndpoint int
	// PollInterval is how often the outbox is looked at when nothing woke
	// the dispatcher: events written by other replicas or without a
	// Wake, retries that fell due, and leases of a crashed dispatcher
	// that lapsed.
	PollInterval time.Duration
	// Lease is how long a claimed delivery stays invisible to other
	// dispatchers; longer than Timeout (at least Timeout + 30 s).
	Lease time.Duration
	// ShutdownGrace is how long Run waits, once its context ends, for the
	// deliveries in flight to finish; past it they are cancelled and given
	// back untried (released), due at once for any replica.
	ShutdownGrace time.Duration
	// Retention is how long delivered and failed deliveries are kept;
	// PruneInterval how often older ones are deleted.
	Retention     time.Duration
	PruneInterval time.Duration
}

// Defaults for the zero fields of Config.
const (
	DefaultTimeout                = 5 * time.Second
	DefaultRetryBackoff           = 30 * time.Second
	DefaultMaxBackoff             = 24 * time.Hour
	DefaultMaxAttempts            = 12
	DefaultMaxRetryAfter          = time.Hour
	DefaultMaxInFlight            = 16
	DefaultMaxInFlightPerEndpoint = 4
	DefaultPollInterval           = 2 * time.Second
	DefaultShutdownGrace          = 10 * time.Second
	DefaultRetention              = 30 * 24 * time.Hour
	DefaultPruneInterval          = time.Hour
)

// minRetryDelay is the shortest wait before a retry.
const minRetryDelay = time.Second

func (c Config) withDefaults() Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&c.Timeout, DefaultTimeout)
	set(&c.RetryBackoff, DefaultRetryBackoff)
	set(&c.MaxBackoff, DefaultMaxBackoff)
	c.MaxBackoff = max(c.MaxBackoff, c.RetryBackoff)
	set(&c.MaxRetryAfter, DefaultMaxRetryAfter)
	set(&c.PollInterval, DefaultPollInterval)
	set(&c.ShutdownGrace, DefaultShutdownGrace)
	set(&c.Retention, DefaultRetention)
	set(&c.PruneInterval, DefaultPruneInterval)
	c.Lease = max(c.Lease, c.Timeout+30*time.Second)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlightPerEndpoint <= 0 {
		c.MaxInFlightPerEndpoint = DefaultMaxInFlightPerEndpoint
	}
	c.MaxInFlightPerEndpoint = min(c.MaxInFlightPerEndpoint, c.MaxInFlight)
	return c
}

// Dispatcher delivers the outbox. Dispatchers of several replicas share it
// through leases: a delivery is sent by one at a time, and one whose
// dispatcher crashed falls due again when its lease lapses. Delivery is at
// least once: a crash between sending and recording sends it again, with
// the same event id.
type Dispatcher struct {
	st     Store
	opener Opener
	client *http.Client
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	rand   io.Reader
	randMu sync.Mutex
	wake   chan struct{}
	done   chan struct{} // a delivery finished: a slot is free

	mu       sync.Mutex
	inFlight map[string]int // per endpoint
	total    int
	retryAt  time.Time // the earliest retry this dispatcher scheduled

	deliveries *prometheus.CounterVec
	attempts   prometheus.Counter
	latency    prometheus.Histogram
	oldest     prometheus.Gauge
}

// New returns a dispatcher. client sends the deliveries: in production the
// SSRF-safe netguard client (Guard.Client(cfg.Timeout)); redirects are never
// followed whatever client is given. opener opens the endpoints' sealed
// secrets; rand supplies the retry jitter (crypto/rand.Reader in
// production). Its metrics are registered with reg when it is not nil.
func New(st Store, opener Opener, client *http.Client, cfg Config, log *slog.Logger, reg prometheus.Registerer, now func() time.Time, rand io.Reader) (*Dispatcher, error) {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d := &Dispatcher{
		st: st, opener: opener, client: &c, cfg: cfg.withDefaults(), log: log, now: now, rand: rand,
		wake: make(chan struct{}, 1), done: make(chan struct{}, 1), inFlight: map[string]int{},
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered, retry (failed, will be retried) or failed (given up).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "issuer_webhook_attempts_total", Help: "Webhook delivery attempts made.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "issuer_webhook_attempt_duration_seconds", Help: "Time from sending a webhook delivery to its answer or failure.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "issuer_webhook_oldest_pending_age_seconds",
			Help: "Age of the oldest pending webhook delivery of an enabled endpoint; 0 when none is pending.",
		}),
	}
	for _, o := range []string{outcomeDelivered, outcomeRetry, outcomeFailed} {
		d.deliveries.WithLabelValues(o)
	}
	if reg != nil {
		if err := errors.Join(reg.Register(d.deliveries), reg.Register(d.attempts), reg.Register(d.latency), reg.Register(d.oldest)); err != nil {
			return nil, fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return d, nil
}

// Outcomes of an attempt, as the metrics name them.
const (
	outcomeDelivered = "delivered"
	outcomeRetry     = "retry"
	outcomeFailed    = "failed"
)

// Wake asks the dispatcher to look at the outbox now (after a commit that
// queued deliveries, or a redelivery). It never blocks.
func (d *Dispatcher) Wake() { signal(d.wake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends: at once at start, when woken, when a slot
// frees, when a retry it scheduled falls due, and every PollInterval; it
// prunes every PruneInterval and updates the oldest-pending gauge. When ctx
// ends it claims nothing more and returns once the deliveries in flight
// have finished and been recorded, or, past ShutdownGrace, once they have
// been cancelled and released.
func (d *Dispatcher) Run(ctx context.Context) {
	// Deliveries outlive ctx until the grace ends; sendCtx ends them then.
	sendCtx, cancelSends := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSends()
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastPrune, lastGauge time.Time
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-d.done:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			break
		}
		now := d.now()
		if lastPrune.IsZero() || now.Sub(lastPrune) >= d.cfg.PruneInterval {
			lastPrune = now
			d.prune(ctx, now)
		}
		if lastGauge.IsZero() || now.Sub(lastGauge) >= d.cfg.PollInterval {
			lastGauge = now
			d.updateOldest(ctx, now)
		}
		d.fill(ctx, sendCtx, &wg)
		timer.Reset(d.nextWait())
	}
	d.shutdown(sendCtx, cancelSends, &wg)
}

// shutdown waits for the deliveries in flight, at most ShutdownGrace, then
// cancels the rest: each releases its delivery instead of recording it.
func (d *Dispatcher) shutdown(sendCtx context.Context, cancel context.CancelFunc, wg *sync.WaitGroup) {
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	grace := time.NewTimer(d.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
		return
	case <-grace.C:
	}
	cancel()
	<-finished
}

// nextWait is how long the loop sleeps when nothing wakes it.
func (d *Dispatcher) nextWait() time.Duration {
	wait := d.cfg.PollInterval
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.retryAt.IsZero() {
		wait = min(wait, max(d.retryAt.Sub(d.now()), 0))
		d.retryAt = time.Time{}
	}
	return wait
}

// fill claims as many due deliveries as there are free slots and starts
// sending them, until the outbox has no more due or the slots are full.
func (d *Dispatcher) fill(ctx, sendCtx context.Context, wg *sync.WaitGroup) {
	for ctx.Err() == nil {
		d.mu.Lock()
		free := d.cfg.MaxInFlight - d.total
		d.mu.Unlock()
		if free <= 0 {
			return
		}
		claimed, err := d.st.ClaimWebhookDeliveries(ctx, d.now(), free, d.cfg.MaxInFlightPerEndpoint, d.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("webhook outbox: claim", "err", err)
			}
			return
		}
		released := false
		for _, c := range claimed {
			if !d.take(c.Delivery.EndpointID) {
				// The store's cap counts every replica's leases; this
				// one's count is only a safety net.
				d.release(c)
				released = true
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer d.untake(c.Delivery.EndpointID)
				d.deliver(sendCtx, c)
			}()
		}
		// What was given back is due at once: claiming again now would
		// only spin.
		if len(claimed) < free || released {
			return
		}
	}
}

// take reserves a slot for an endpoint's delivery, unless its endpoint has
// MaxInFlightPerEndpoint in flight already.
func (d *Dispatcher) take(endpointID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inFlight[endpointID] >= d.cfg.MaxInFlightPerEndpoint || d.total >= d.cfg.MaxInFlight {
		return false
	}
	d.inFlight[endpointID]++
	d.total++
	return true
}

func (d *Dispatcher) untake(endpointID string) {
	d.mu.Lock()
	d.inFlight[endpointID]--
	if d.inFlight[endpointID] == 0 {
		delete(d.inFlight, endpointID)
	}
	d.total--
	d.mu.Unlock()
	signal(d.done)
}

// scheduled notes a retry this dispatcher scheduled, so it looks again
// when it falls due rather than at the next poll.
func (d *Dispatcher) scheduled(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.retryAt.IsZero() || at.Before(d.retryAt) {
		d.retryAt = at
	}
}

// release gives a claimed delivery back untried.
func (d *Dispatcher) release(c store.ClaimedDelivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.st.ReleaseWebhookDelivery(ctx, c.Delivery.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		// The lease lapses on its own.
		d.log.Error("webhook delivery not released; it is due again when its lease lapses",
			"endpoint_id", c.Delivery.EndpointID, "delivery_id", c.Delivery.ID, "err", err)
	}
}

func (d *Dispatcher) prune(ctx context.Context, now time.Time) {
	n, err := d.st.PruneWebhookDeliveries(ctx, now.Add(-d.cfg.Retention))
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Error("webhook outbox: prune", "err", err)
	case n > 0:
		d.log.Info("webhook outbox: pruned finished deliveries", "count", n)
	}
}

func (d *Dispatcher) updateOldest(ctx context.Context, now time.Time) {
	oldest, err := d.st.OldestPendingWebhookDelivery(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			d.log.Error("webhook outbox: oldest pending delivery", "err", err)
		}
	case oldest == nil:
		d.oldest.Set(0)
	default:
		d.oldest.Set(max(now.Sub(*oldest), 0).Seconds())
	}
}
