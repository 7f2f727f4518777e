package httpserver

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics records the count and latency of requests per route.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates <namespace>_http_requests_total{route,method,code} and
// <namespace>_http_request_duration_seconds{route,method} and registers them
// with reg. When reg already holds them (a second NewMetrics on the same
// registry) the registered collectors are shared. A nil reg registers
// nothing. Any other registration failure is a programming error and panics,
// as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer, namespace string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "http_requests_total",
			Help:      "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "http_request_duration_seconds",
			Help:      "HTTP request latency by route pattern and method.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"route", "method"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
	}
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}

// Wrap records every request that next serves under route, which must be the
// ServeMux pattern next is registered with (e.g. "DELETE /v1/sessions/{id}"),
// never the raw path: one series per pattern keeps the label set bounded
// whatever clients send.
func (m *Metrics) Wrap(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorderFor(w)
		returned := false
		// Observed in a defer without recovering, so a panic is counted (as
		// the 500 Recover makes of it) and still reaches Recover intact.
		defer func() {
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(route, method, strconv.Itoa(rec.finalStatus(!returned))).Inc()
			m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}

// methodLabel folds methods outside the standard set into "OTHER": a pattern
// without a method matches any, and clients may send arbitrary ones.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	default:
		return "OTHER"
	}
}
