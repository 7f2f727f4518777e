package proxy

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// Outcomes of a request, the "outcome" label.
const (
	OutcomeAllowed  = "allowed"
	OutcomeRejected = "rejected"
	OutcomePublic   = "public"
)

// Reasons a request let through did not complete, the "reason" label of
// verifier_proxy_failures_total.
const (
	// FailureBodyTimeout is a client whose body stalled or trickled
	// past the body deadlines (answered 408).
	FailureBodyTimeout = "body_timeout"
	// FailureClientGone is a client that went away before the answer.
	FailureClientGone = "client_gone"
	// FailureBadBody is an HTTP/1.1 client whose body was malformed
	// (answered 400 when nothing had been answered yet).
	FailureBadBody = "bad_body"
	// FailureUpstream is an app that could not be reached or did not
	// answer (answered 502).
	FailureUpstream = "upstream"
)

// Metrics are the verifier's Prometheus series. A nil *Metrics records
// nothing.
type Metrics struct {
	requests        *prometheus.CounterVec
	failures        *prometheus.CounterVec
	allowed, public prometheus.Counter            // requests' children resolved once
	rejected        childCache[verify.Reason]     // requests{outcome="rejected"} by reason
	failed          map[string]prometheus.Counter // failures by reason, fixed at construction
	latency         prometheus.Histogram
	refreshFailures prometheus.Counter
	revFailures     prometheus.Counter // nil until WithRevocations
}

// NewMetrics registers the series on reg. keySetAge reports the seconds
// since the key set was last loaded (a negative value while none is).
func NewMetrics(reg prometheus.Registerer, keySetAge func() float64) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verifier_requests_total",
			Help: "Requests by outcome (allowed, rejected, public) and rejection reason.",
		}, []string{"outcome", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verifier_proxy_failures_total",
			Help: "Requests let through (counted allowed or public) that did not complete, by reason: body_timeout (the client's body stalled or trickled, 408), client_gone, upstream (502).",
		}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "verifier_verification_seconds",
			Help:    "Time spent verifying one access token (cache hits included).",
			Buckets: []float64{1e-6, 5e-6, 2e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.05, 0.5},
		}),
		refreshFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "verifier_keyset_refresh_failures_total",
			Help: "Failed fetches or reloads of the key set (the last good set stays in use).",
		}),
	}
	// Resolving a child hashes its labels under the vector's lock: done
	// once here for the outcomes every request counts, not per request.
	m.allowed = m.requests.WithLabelValues(OutcomeAllowed, "")
	m.public = m.requests.WithLabelValues(OutcomePublic, "")
	m.rejected = childCache[verify.Reason]{resolve: func(r verify.Reason) prometheus.Counter {
		return m.requests.WithLabelValues(OutcomeRejected, string(r))
	}}
	m.failed = map[string]prometheus.Counter{}
	for _, r := range []string{FailureBodyTimeout, FailureClientGone, FailureBadBody, FailureUpstream} {
		m.failed[r] = m.failures.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.failures, m.latency, m.refreshFailures, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "verifier_keyset_age_seconds",
		Help: "Seconds since the key set was last loaded successfully; -1 while none is.",
	}, keySetAge))
	return m
}

func (m *Metrics) outcome(outcome string, reason verify.Reason) {
	if m == nil {
		return
	}
	switch outcome {
	case OutcomeAllowed:
		m.allowed.Inc()
	case OutcomePublic:
		m.public.Inc()
	default:
		m.rejected.get(reason).Inc()
	}
}

func (m *Metrics) failure(reason string) {
	if m == nil {
		return
	}
	if c, ok := m.failed[reason]; ok {
		c.Inc()
		return
	}
	m.failures.WithLabelValues(reason).Inc()
}

// childCache holds the children of one vector by label value, resolved
// on first use (so a reason never seen adds no series) and then read
// without a lock or an allocation: the map is copied on each addition,
// which happens once per reason.
type childCache[K comparable] struct {
	resolve func(K) prometheus.Counter
	mu      sync.Mutex
	m       atomic.Pointer[map[K]prometheus.Counter]
}

func (c *childCache[K]) get(k K) prometheus.Counter {
	if m := c.m.Load(); m != nil {
		if ctr, ok := (*m)[k]; ok {
			return ctr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if ctr, ok := (*old)[k]; ok {
			return ctr
		}
	}
	next := make(map[K]prometheus.Counter, 1)
	if old != nil {
		maps.Copy(next, *old)
	}
	ctr := c.resolve(k)
	next[k] = ctr
	c.m.Store(&next)
	return ctr
}

func (m *Metrics) observe(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}

// WithRevocations registers the revocation list's series on reg:
// staleness reports the seconds since the list was last refreshed (a
// negative value while none has loaded), size its entries. The refusals it
// causes are counted by verifier_requests_total with the reasons
// session_revoked, key_revoked and revocations_stale, which start at 0.
func (m *Metrics) WithRevocations(reg prometheus.Registerer, staleness, size func() float64) {
	m.revFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "verifier_revocations_refresh_failures_total",
		Help: "Failed refreshes of the revocation list (the last good list stays in use).",
	})
	reg.MustRegister(m.revFailures, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "verifier_revocations_staleness_seconds",
		Help: "Seconds since the revocation list was last refreshed successfully; -1 while none has loaded.",
	}, staleness), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "verifier_revocations_entries",
		Help: "Sessions and signing keys on the revocation list.",
	}, size))
	for _, r := range []verify.Reason{verify.ReasonSessionRevoked, verify.ReasonKeyRevoked, verify.ReasonRevocationsStale} {
		m.rejected.get(r)
	}
}

// RevocationRefreshFailed counts a failed refresh of the revocation list.
func (m *Metrics) RevocationRefreshFailed() {
	if m != nil && m.revFailures != nil {
		m.revFailures.Inc()
	}
}

// RefreshFailed counts a failed key-set fetch.
func (m *Metrics) RefreshFailed() {
	if m != nil {
		m.refreshFailures.Inc()
	}
}
