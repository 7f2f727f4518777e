package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// BenchmarkVerifierProxy measures the verifier's proxy against a bare
// httputil.ReverseProxy in the same run, over real loopback connections to
// the same upstream, in alternating rounds of equal size so that whatever
// else the machine does falls on both alike. It reports each one's ops/s
// and the ratio verifier/bare. Targets: at least 1.3 with the token cache
// on, at least 0.8 with it off.
//
// The bare proxy is what a Go programmer would write first:
// http.DefaultTransport cloned with only its idle pool raised (the default
// two idle connections per host would make it redial constantly), no
// buffer pool. The verifier runs the chain the binary serves: request id,
// the buffered access log at info (to io.Discard, so the formatting is
// counted), panic recovery, metrics.
//
// upload POSTs a 64 KiB body to an app that reads it, with the cache on:
// the verifier reads each upload for the transport in a goroutine of its
// own (see duplexOut), which this measures. It has no target.
func BenchmarkVerifierProxy(b *testing.B) {
	for _, tc := range []struct {
		name  string
		cache int
		body  int
	}{{"cached", 10000, 0}, {"uncached", 0, 0}, {"upload", 10000, 64 << 10}} {
		b.Run(tc.name, func(b *testing.B) {
			ks := verifytest.NewKeySet(b)
			ks.TTL = time.Hour
			v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, CacheSize: tc.cache})
			if err != nil {
				b.Fatal(err)
			}
			u := benchUpstream(b)

			out := httpserver.NewLogWriter(io.Discard, httpserver.LogFlushInterval)
			defer out.Close(context.Background())
			log := httpserver.NewLogger(out, slog.LevelInfo)
			metrics := proxy.NewMetrics(prometheus.NewRegistry(), func() float64 { return 0 })
			p := proxy.NewProxy(v, u, nil, proxy.Config{Logger: log, Metrics: metrics})
			verifier := httptest.NewServer(httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, p))))
			defer verifier.Close()

			bare := httptest.NewServer(bareProxy(u))
			defer bare.Close()

			tok := ks.Token(b, "user-1")
			// Warm both: connection pools, the token cache, buffer pools.
			load(b, bare.URL, tok, 256, tc.body)
			load(b, verifier.URL, tok, 256, tc.body)

			const rounds = 4
			var bareTime, verifierTime time.Duration
			n := max(b.N/rounds, 1)
			b.ResetTimer()
			for range rounds {
				bareTime += load(b, bare.URL, tok, n, tc.body)
				verifierTime += load(b, verifier.URL, tok, n, tc.body)
			}
			b.StopTimer()
			bareOps := float64(n*rounds) / bareTime.Seconds()
			verifierOps := float64(n*rounds) / verifierTime.Seconds()
			b.ReportMetric(bareOps, "bare-ops/s")
			b.ReportMetric(verifierOps, "verifier-ops/s")
			b.ReportMetric(verifierOps/bareOps, "ratio")
		})
	}
}

// bareProxy is the baseline: a ReverseProxy with the default transport's
// settings but for a large idle pool, and nothing else.
func bareProxy(u *url.URL) http.Handler {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: t,
	}
}

func benchUpstream(b *testing.B) *url.URL {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// benchClients is the number of concurrent clients, each on its own
// keep-alive connection.
const benchClients = 32

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}}

// load sends n GET requests with the token to target from benchClients
// clients, or POSTs of body bytes when body is not 0, and returns how long
// they took.
func load(b *testing.B, target, token string, n, body int) time.Duration {
	payload := make([]byte, body)
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, target+"/orders", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if body > 0 {
				req.Method = http.MethodPost
				req.ContentLength = int64(body)
			}
			for left.Add(-1) >= 0 {
				if body > 0 {
					req.Body = io.NopCloser(bytes.NewReader(payload))
				}
				resp, err := benchClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
