package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// The verifier proxy is measured against a bare httputil.ReverseProxy with
// the same transport, in the same run, over real loopback connections.
// Target: the verifier at least 90% of the bare proxy's throughput with
// the verified-token cache on.

func benchUpstream(b *testing.B) *url.URL {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
}

func runLoad(b *testing.B, target, token string) {
	c := benchClient()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodGet, target+"/orders", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		for pb.Next() {
			resp, err := c.Do(req)
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkBareReverseProxy(b *testing.B) {
	u := benchUpstream(b)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: proxy.NewTransport()}
	srv := httptest.NewServer(rp)
	defer srv.Close()
	runLoad(b, srv.URL, "unused")
}

func BenchmarkVerifierProxy(b *testing.B) {
	for _, tc := range []struct {
		name  string
		cache int
	}{{"cached", 10000}, {"uncached", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			ks := verifytest.NewKeySet(b)
			ks.TTL = time.Hour
			v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, CacheSize: tc.cache})
			if err != nil {
				b.Fatal(err)
			}
			// The same chain the binary serves, access log included (JSON to
			// io.Discard, so its formatting cost is counted).
			log := httpserver.NewLogger(io.Discard, slog.LevelInfo)
			p := proxy.NewProxy(v, benchUpstream(b), nil, proxy.Config{Logger: log})
			srv := httptest.NewServer(httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, p))))
			defer srv.Close()
			runLoad(b, srv.URL, ks.Token(b, "user-1"))
		})
	}
}
