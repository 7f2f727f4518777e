package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// lockedBuffer is a log sink the test reads while the server writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// failures returns verifier_proxy_failures_total by reason.
func failures(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "verifier_proxy_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// TestProxyStalledBodyIs408 checks that a client whose body stalls past
// the idle timeout gets 408 request_timeout, not the 502 of a failing app,
// and is counted and logged as a slow client. The transports return on
// the request's cancellation, HTTP/2's (and HTTP/1.1's once a goroutine of
// the proxy's made the reads) before the timed-out read has, and a
// stalled body was dropped as a client gone in about 1 run in 4.
func TestProxyStalledBodyIs408(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) { stalledBodyIs408(t, protocol) })
	}
}

func stalledBodyIs408(t *testing.T, protocol string) {
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Algorithms: []string{"RS256"}})
	if err != nil {
		t.Fatal(err)
	}
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	p := proxy.NewProxy(v, u, nil, proxy.Config{Logger: log, Metrics: proxy.NewMetrics(reg, func() float64 { return 0 }), UpstreamProtocol: protocol})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 200 * time.Millisecond})

	for i := 0; i < 3; i++ { // the transport's error varies from run to run
		conn, br := rawHTTP1(t, addr, "POST /upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ks.Token(t, "u")+"\r\nContent-Length: 100\r\n\r\nx")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("stalled body: reading the answer: %v (failures %v)", err, failures(t, reg))
		}
		var prob struct{ Code string }
		json.NewDecoder(res.Body).Decode(&prob)
		res.Body.Close()
		conn.Close()
		if res.StatusCode != http.StatusRequestTimeout || prob.Code != "request_timeout" || res.Header.Get("Content-Type") != "application/problem+json" || !res.Close {
			t.Errorf("stalled body answered %d %q %q (close %t), want 408 request_timeout problem+json and the connection closed",
				res.StatusCode, prob.Code, res.Header.Get("Content-Type"), res.Close)
		}
	}
	if got := failures(t, reg); got[proxy.FailureBodyTimeout] != 3 || got[proxy.FailureUpstream] != 0 || got[proxy.FailureClientGone] != 0 {
		t.Errorf("verifier_proxy_failures_total = %v, want body_timeout 3 and no other failure", got)
	}
	if strings.Contains(logs.String(), "upstream unavailable") {
		t.Errorf("a stalled client was logged as an upstream failure:\n%s", logs)
	}
}
