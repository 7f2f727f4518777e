package proxy_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/internal/testnet"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// TestBrokenAnswerIsCountedOnBothPaths: an answer the app cuts short
// reaches the client as cut (its connection dropped, never a clean end)
// and counts as an upstream failure, on the direct path (a bodiless GET)
// as on ReverseProxy's (a POST); the direct path counted nothing.
func TestBrokenAnswerIsCountedOnBothPaths(t *testing.T) {
	up := testnet.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short")
		}
	})
	ks := verifytest.NewKeySet(t)
	reg := prometheus.NewRegistry()
	p := proxy.NewProxy(ks.Verifier(t), &url.URL{Scheme: "http", Host: up}, nil,
		proxy.Config{Logger: slog.New(slog.DiscardHandler), Metrics: proxy.NewMetrics(reg, func() float64 { return 0 })})
	addr := serveProxy(t, p, httpserver.Options{})
	for i, method := range []string{http.MethodGet, http.MethodPost} {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("x")
		}
		req, _ := http.NewRequest(method, "http://"+addr+"/x", body)
		req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
		// The head may go out before the cut or with it: either way the
		// client must not get a clean end.
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Errorf("%s: the cut answer read to a clean end", method)
		}
		if got := failures(t, reg)[proxy.FailureUpstream]; got != float64(i+1) {
			t.Errorf("after %s: upstream failures = %v, want %d", method, got, i+1)
		}
	}
}
