package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
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
// and is counted and logged as a slow client.
func TestProxyStalledBodyIs408(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Algorithms: []string{"RS256"}})
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	u, _ := url.Parse(up.srv.URL)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	p := proxy.NewProxy(v, u, nil, proxy.Config{Logger: log, Metrics: proxy.NewMetrics(reg, func() float64 { return 0 })})
	srv := httpserver.New("proxy", log, p, httpserver.Options{BodyIdleTimeout: 200 * time.Millisecond})
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for i := 0; i < 3; i++ { // the transport's error varies from run to run
		conn, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ks.Token(t, "u")+"\r\nContent-Length: 100\r\n\r\nx")
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("stalled body: reading the answer: %v", err)
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
	if got := failures(t, reg); got[proxy.FailureBodyTimeout] != 3 || got[proxy.FailureUpstream] != 0 {
		t.Errorf("verifier_proxy_failures_total = %v, want body_timeout 3 and no upstream failure", got)
	}
	if strings.Contains(logs.String(), "upstream unavailable") {
		t.Errorf("a stalled client was logged as an upstream failure:\n%s", logs)
	}
}
