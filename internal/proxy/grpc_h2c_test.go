package proxy_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// TestH2CClientToHTTP1Upstream: with the default transport an HTTP/2 client
// reaches an HTTP/1.1 app as before, the request downgraded to HTTP/1.1.
func TestH2CClientToHTTP1Upstream(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	app := newUpstream(t)
	protos := make(chan int, 1)
	app.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.ProtoMajor
		w.Write([]byte("ok"))
	})
	u, _ := url.Parse(app.srv.URL)
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamHTTP1)
	c := h2cClient(t)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/orders", nil)
	req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("h2c GET = %d over HTTP/%d, want 200 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
	}
	if got := <-protos; got != 1 {
		t.Errorf("app saw HTTP/%d, want HTTP/1", got)
	}
}

// TestH2CUpgradeStillRefused: the listener speaks h2c with prior knowledge
// but an HTTP/1.1 "Upgrade: h2c", which would switch a whole connection on
// one checked request, is answered as plain HTTP/1.1.
func TestH2CUpgradeStillRefused(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	app := newUpstream(t)
	u, _ := url.Parse(app.srv.URL)
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamHTTP1)
	for _, tc := range []struct {
		name, path, auth string
		want             int
	}{
		{"public path", "/public/a", "", http.StatusOK},
		{"valid token", "/orders", "Bearer " + ks.Token(t, "user-1"), http.StatusOK},
		{"no token", "/orders", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app.last.Store(nil)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := "GET " + tc.path + " HTTP/1.1\r\nHost: app\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
			if tc.auth != "" {
				req += "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || resp.ProtoMajor != 1 {
				t.Errorf("Upgrade: h2c %s = %d over HTTP/%d.%d, want %d over HTTP/1.1", tc.path, resp.StatusCode, resp.ProtoMajor, resp.ProtoMinor, tc.want)
			}
			if h := app.last.Load(); tc.want == http.StatusOK && h != nil && (h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "") {
				t.Errorf("app received Upgrade %q, HTTP2-Settings %q, want neither", h.Get("Upgrade"), h.Get("Http2-Settings"))
			}
		})
	}
}

// h2cVerifier serves the proxy to upstream, which speaks protocol
// (proxy.UpstreamHTTP1 or proxy.UpstreamH2C), as the binary does: the
// middleware chain, the body deadlines and HTTP/1.1 plus h2c on one port.
func h2cVerifier(t testing.TB, v *verify.Verifier, upstream *url.URL, protocol string) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	p := proxy.NewProxy(v, upstream, nil, proxy.Config{Logger: log, Public: proxy.NewPublicPaths([]string{"/public/*"}), UpstreamProtocol: protocol})
	return serveProxy(t, httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, p))), httpserver.Options{BodyIdleTimeout: 30 * time.Second, BodyMinRate: 1024})
}

// serveProxy serves h on a loopback port, over HTTP/1.1 and h2c as the
// binary's proxy listener, until the test ends, and returns its address.
func serveProxy(t testing.TB, h http.Handler, opts httpserver.Options) string {
	t.Helper()
	addr, _ := startProxy(t, h, opts)
	return addr
}

// startProxy is serveProxy that also returns shutdown, which begins the
// server's graceful shutdown and returns what Serve returned once it has
// ended. The test's end shuts it down if shutdown was not called.
func startProxy(t testing.TB, h http.Handler, opts httpserver.Options) (addr string, shutdown func() error) {
	t.Helper()
	opts.Protocols = proxy.ServerProtocols()
	srv := httpserver.New("proxy", slog.New(slog.DiscardHandler), h, opts)
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	var once sync.Once
	var err error
	shutdown = func() error {
		once.Do(func() { cancel(); err = <-served })
		return err
	}
	t.Cleanup(func() { shutdown() })
	return srv.Addr().String(), shutdown
}
