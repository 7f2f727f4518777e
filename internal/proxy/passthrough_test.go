package proxy_test

import (
	"compress/gzip"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// h2cClient speaks HTTP/2 with prior knowledge, as a gRPC client does. It
// sends no Accept-Encoding of its own. Its connections close before the
// servers started earlier shut down, which would otherwise give them a
// second's grace after GOAWAY.
func h2cClient(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h2cApp serves h over HTTP/1.1 and h2c until the test ends.
func h2cApp(t *testing.T, h http.HandlerFunc) *url.URL {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

// With either upstream protocol the app gets the client's Accept-Encoding,
// or none, and the client gets the body as the app encoded it. The h2c
// transport used to ask for gzip itself and decompress in between.
func TestNoTransparentCompression(t *testing.T) {
	const text = "hello hello hello"
	ks := verifytest.NewKeySet(t)
	for _, protocol := range []string{proxy.UpstreamHTTP1, proxy.UpstreamH2C} {
		t.Run(protocol, func(t *testing.T) {
			seen := make(chan string, 1)
			u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Get("Accept-Encoding")
				if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					zw.Write([]byte(text))
					zw.Close()
					return
				}
				w.Write([]byte(text))
			})
			addr := h2cVerifier(t, ks.Verifier(t), u, protocol)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ae := <-seen; ae != "" {
				t.Errorf("app saw Accept-Encoding %q; the client sent none", ae)
			}
			if resp.StatusCode != http.StatusOK || string(body) != text || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("answer = %d %q (Content-Encoding %q), want 200 %q as the app sent it", resp.StatusCode, body, resp.Header.Get("Content-Encoding"), text)
			}
		})
	}
}

// A client's request trailers never reach the app, names or values: they
// arrive after the body, beyond the identity check, and a trailer frame
// ends a grpc-go server's whole connection. They used to arrive as names
// without values.
func TestRequestTrailersAreNotPassedOn(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	for _, protocol := range []string{proxy.UpstreamHTTP1, proxy.UpstreamH2C} {
		t.Run(protocol, func(t *testing.T) {
			got := make(chan http.Header, 1)
			u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				got <- r.Trailer.Clone()
			})
			addr := h2cVerifier(t, ks.Verifier(t), u, protocol)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", io.NopCloser(strings.NewReader("body")))
			req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
			req.Trailer = http.Header{"X-Checksum": {"abc123"}, proxy.HeaderUserID: {"admin"}}
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST with trailers = %d, want 200", resp.StatusCode)
			}
			if tr := <-got; len(tr) != 0 {
				t.Errorf("app saw request trailers %q, want none", tr)
			}
		})
	}
}

// Every answer carries the verifier's X-Request-Id, one the app preceded
// with 103 Early Hints too: ReverseProxy clears the header map after
// relaying a 1xx, and the bodiless fast path deleted what the 1xx named,
// the app's own X-Request-Id among it.
func TestRequestIDSurvivesEarlyHints(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set(httpserver.HeaderRequestID, "app-id")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del(httpserver.HeaderRequestID)
		w.Write([]byte("ok"))
	})
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamHTTP1)
	for _, method := range []string{http.MethodGet, http.MethodPost} { // the bodiless fast path, then ReverseProxy
		req, _ := http.NewRequest(method, "http://"+addr+"/orders", strings.NewReader("x"))
		if method == http.MethodGet {
			req.Body, req.ContentLength = nil, 0
		}
		req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ids := resp.Header.Values(httpserver.HeaderRequestID); resp.StatusCode != http.StatusOK || len(ids) != 1 || ids[0] == "" || ids[0] == "app-id" {
			t.Errorf("%s after a 103 = %d with X-Request-Id %q, want 200 with the verifier's id alone", method, resp.StatusCode, ids)
		}
	}
}

// A stream to an h2c app whose connection goes silent (a host gone, a
// partition: no FIN, no RST) ends once a ping goes unanswered, rather
// than when TCP keepalive gives up minutes later. The ping timings are
// shortened here; NewH2CTransport's are 30 s and 15 s.
func TestSilentUpstreamConnectionEndsItsStreams(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	relay := newFreezingRelay(t, u.Host)
	u.Host = relay.addr
	tr := proxy.NewH2CTransport()
	if tr.HTTP2 == nil || tr.HTTP2.SendPingTimeout <= 0 {
		t.Fatalf("NewH2CTransport's HTTP2 config = %+v, want a ping health check", tr.HTTP2)
	}
	tr.HTTP2.SendPingTimeout, tr.HTTP2.PingTimeout = 100*time.Millisecond, 100*time.Millisecond
	p := proxy.NewProxy(ks.Verifier(t), u, tr, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	addr := serveProxy(t, p, httpserver.Options{})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/watch", nil)
	req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
	resp, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("first"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	relay.freeze()
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second): // a hang guard: the ping ends it in ~0.2 s
		t.Fatal("the stream over a silent upstream connection did not end")
	}
}

// freezingRelay relays TCP connections to a target until freeze, after
// which it passes nothing either way and closes nothing: a peer that went
// silent.
type freezingRelay struct {
	addr   string
	frozen chan struct{}
	once   sync.Once
}

func newFreezingRelay(t *testing.T, target string) *freezingRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &freezingRelay{addr: ln.Addr().String(), frozen: make(chan struct{})}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { r.pass(up, c) })
			wg.Go(func() { r.pass(c, up) })
		}
	})
	return r
}

func (r *freezingRelay) freeze() { r.once.Do(func() { close(r.frozen) }) }

// pass copies from src to dst until either fails, holding whatever it
// reads once frozen.
func (r *freezingRelay) pass(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-r.frozen:
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
