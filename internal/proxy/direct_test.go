package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/palisade-auth/palisade/internal/testnet"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// directFixture is the proxy in front of an upstream, serving on srv;
// token is valid for it. reference is the same proxy with every request
// going through ReverseProxy, which direct must match; serving picks the
// one srv serves with.
type directFixture struct {
	p, reference *Proxy
	serving      atomic.Pointer[Proxy]
	srv          *httptest.Server
	token        string
}

// newDirectFixture builds the proxy as NewProxy does for the binary.
func newDirectFixture(t *testing.T, upstream string) *directFixture {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Algorithms: []string{"RS256"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	f := &directFixture{p: NewProxy(v, u, nil, Config{Logger: slog.New(slog.DiscardHandler)}), token: ks.Token(t, "user-1")}
	if f.p.direct == nil {
		t.Fatal("NewProxy with the default transport and a plain-HTTP upstream has no direct path")
	}
	ref := *f.p
	ref.direct = nil
	f.reference = &ref
	f.serving.Store(f.p)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serving.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// do sends method path with the fixture's token and hdr, on a client of
// its own, and returns the answer with its body read.
func (f *directFixture) do(t *testing.T, method, path string, hdr http.Header) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// TestDirectForwardsAsReverseProxyDoes sends the same requests through
// the direct path and through ReverseProxy and compares, field by field,
// what the app saw and what the client got: the direct path is an
// optimisation, never a different proxy.
func TestDirectForwardsAsReverseProxyDoes(t *testing.T) {
	var seen atomic.Pointer[string]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := fmt.Sprintf("%s %s host=%s proto=%s header=%v", r.Method, r.RequestURI, r.Host, r.Proto, r.Header)
		seen.Store(&rec)
		h := w.Header()
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "connection-scoped")
		h.Set("Keep-Alive", "timeout=5")
		h["X-Multi"] = []string{"a", "b"}
		h.Set("Trailer", "X-Sum")
		w.WriteHeader(http.StatusNonAuthoritativeInfo)
		if r.Method != http.MethodHead {
			io.WriteString(w, "body for "+r.URL.RawQuery)
		}
		h.Set("X-Sum", "42")
		h.Set(http.TrailerPrefix+"X-Late", "late")
	}))
	defer up.Close()
	f := newDirectFixture(t, up.URL)

	cases := []struct {
		method, path string
		hdr          http.Header
	}{
		{http.MethodGet, "/a%2Fb/c?x=1&y=2", http.Header{
			"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Host": {"evil"}, "Forwarded": {"for=evil"},
			"X-Auth-User-Id": {"evil"}, "X_auth_role": {"admin"},
			"Connection": {"X-Secret"}, "X-Secret": {"hop"}, "Te": {"trailers"}, "Proxy-Authorization": {"Basic x"},
			"Cookie":     {"a=1; " + verify.DefaultRefreshCookie + "=r; b=2"},
			"User-Agent": {""}, // none sent
		}},
		{http.MethodGet, "/ua", http.Header{"User-Agent": {"probe/1"}, "Accept-Encoding": {"gzip"}}},
		{http.MethodHead, "/head", nil},
		{http.MethodOptions, "/options?q", nil},
		{http.MethodGet, "/semicolon?a=1;b=2", nil}, // ReverseProxy's own, in both
		// Queries ReverseProxy re-encodes, dropping what does not parse:
		// the app must see the same on both paths.
		{http.MethodGet, "/badescape?b=2&a=%zz&c=3", nil},
		{http.MethodGet, "/cutescape?x=1%2", nil},
		{http.MethodGet, "/manyparams?" + strings.Repeat("&", 10000) + "b=2", nil},
		{http.MethodGet, "/fine?a=%41&b=+&c", nil},
	}
	for _, tc := range cases {
		var got [2]string
		for i, p := range []*Proxy{f.p, f.reference} {
			f.serving.Store(p)
			seen.Store(nil)
			resp, body, err := f.do(t, tc.method, tc.path, tc.hdr)
			if err != nil {
				t.Fatalf("%s %s: body: %v", tc.method, tc.path, err)
			}
			resp.Header.Del("Date")
			app := "nothing"
			if s := seen.Load(); s != nil {
				app = *s
			}
			got[i] = fmt.Sprintf("app saw: %s\nclient got: %d %v body=%q trailer=%v",
				app, resp.StatusCode, resp.Header, body, resp.Trailer)
		}
		if got[0] != got[1] {
			t.Errorf("%s %s:\ndirect:\n%s\nReverseProxy:\n%s", tc.method, tc.path, got[0], got[1])
		}
		if strings.Contains(got[0], "evil") || strings.Contains(got[0], "X-Secret") || strings.Contains(got[0], "X-Hop") ||
			strings.Contains(got[0], "r; b") {
			t.Errorf("%s %s: a spoofed, hop-by-hop or hidden value went through:\n%s", tc.method, tc.path, got[0])
		}
	}
	if n := f.p.direct.idleCount(); n == 0 {
		t.Error("the direct fixture kept no upstream connection: its requests did not take the direct path")
	}
}

// countingUpstream is an upstream that counts the connections it accepted
// and reports each one it saw closed.
type countingUpstream struct {
	*httptest.Server
	conns  atomic.Int64
	hits   atomic.Int64
	closed chan struct{}
}

func newCountingUpstream(t *testing.T, h http.HandlerFunc) *countingUpstream {
	u := &countingUpstream{closed: make(chan struct{}, 100)}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h(w, r)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.conns.Add(1)
		case http.StateClosed:
			u.closed <- struct{}{}
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

func wantOK(t *testing.T, f *directFixture, what string) {
	t.Helper()
	resp, body, err := f.do(t, http.MethodGet, "/x", nil)
	if err != nil || resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("%s: %d %q (%v), want 200 ok", what, resp.StatusCode, body, err)
	}
}

func waitClosed(t *testing.T, u *countingUpstream, what string) {
	t.Helper()
	select {
	case <-u.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the upstream saw no connection closed within 10s", what)
	}
}

func TestDirectReusesConnectionsUntilIdleTooLong(t *testing.T) {
	up := newCountingUpstream(t, ok)
	f := newDirectFixture(t, up.URL)
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	f.p.direct.now = func() time.Time { return time.Unix(0, clock.Load()) }

	for i := range 10 {
		wantOK(t, f, fmt.Sprintf("request %d", i))
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("10 requests in turn opened %d upstream connections, want 1", n)
	}
	clock.Add(int64(directIdleTime))
	wantOK(t, f, "after the idle time")
	if n := up.conns.Load(); n != 2 {
		t.Fatalf("after the idle time: %d upstream connections opened, want 2 (the idle one is not reused)", n)
	}
	waitClosed(t, up, "the connection found idle too long")

	// With no request to find it, the sweep closes it.
	d := f.p.direct
	d.mu.Lock()
	pending := d.sweep != nil
	d.mu.Unlock()
	if !pending {
		t.Fatal("a connection went back to the pool and no sweep is pending")
	}
	clock.Add(int64(directIdleTime))
	d.expire()
	waitClosed(t, up, "the sweep")
	d.mu.Lock()
	idle, pending := len(d.idle), d.sweep != nil
	d.mu.Unlock()
	if idle != 0 || pending {
		t.Errorf("after the sweep: %d idle connections, sweep pending %v; want 0, false", idle, pending)
	}
}

func TestDirectRetriesOnceAfterTheUpstreamClosedAnIdleConnection(t *testing.T) {
	up := newCountingUpstream(t, ok)
	f := newDirectFixture(t, up.URL)
	wantOK(t, f, "first request")
	up.CloseClientConnections()
	waitClosed(t, up, "CloseClientConnections")
	wantOK(t, f, "request on the closed idle connection")
	if hits, conns := up.hits.Load(), up.conns.Load(); hits != 2 || conns != 2 {
		t.Errorf("the app saw %d requests on %d connections, want 2 on 2", hits, conns)
	}
}

// rawUpstream serves each connection's first request with serve; it
// returns its URL and the count of connections accepted.
func rawUpstream(t *testing.T, serve func(net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	addr := testnet.Serve(t, func(c net.Conn) {
		n.Add(1)
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			serve(c)
		}
	})
	return "http://" + addr, &n
}

func TestDirectFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		want  int
	}{
		// A fresh connection that fails is not retried.
		{"closed without an answer", func(net.Conn) {}, http.StatusBadGateway},
		{"101 to a request that asked for no switch", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
		}, http.StatusBadGateway},
		{"malformed status line", func(c net.Conn) { io.WriteString(c, "HTTP/1.1 two hundred\r\n\r\n") }, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepted := rawUpstream(t, tc.serve)
			f := newDirectFixture(t, addr)
			resp, _, _ := f.do(t, http.MethodGet, "/x", nil)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if n := accepted.Load(); n != 1 {
				t.Errorf("the upstream accepted %d connections, want 1", n)
			}
		})
	}
}

// TestUpstreamAnswersOutOfBounds: an answer whose head passes 1 MiB (each
// 1xx head has its own bound, as with ReverseProxy's Transport), or whose
// status is not three digits from 100, is a 502 on both paths, not
// a head of any size copied to the client (direct read it unbounded) nor
// net/http's panic on the status (a 500 and a dropped connection).
func TestUpstreamAnswersOutOfBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
	}{
		{"a 2 MiB header", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\nContent-Length: 2\r\n\r\nok")
		}},
		{"status 099", func(c net.Conn) { io.WriteString(c, "HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := rawUpstream(t, tc.serve)
			f := newDirectFixture(t, addr)
			for _, p := range []*Proxy{f.p, f.reference} {
				f.serving.Store(p)
				resp, body, _ := f.do(t, http.MethodGet, "/x", nil)
				if resp.StatusCode != http.StatusBadGateway || len(resp.Header.Get("X-Big")) > 0 {
					t.Errorf("direct %t: %d with %d bytes of X-Big, body %.40q; want 502", p.direct != nil, resp.StatusCode, len(resp.Header.Get("X-Big")), body)
				}
			}
		})
	}
}

// TestDirectNeverRunsARequestTwice: a reused connection whose app began
// its answer and then died has run the request; it fails (502) rather
// than being sent again, as net/http's Transport does. Only a failure
// before the answer's first byte is retried.
func TestDirectNeverRunsARequestTwice(t *testing.T) {
	var seen atomic.Int64
	addr := scriptedUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if seen.Add(1) > 1 && req.URL.Path == "/dies" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	f := newDirectFixture(t, addr)
	wantOK(t, f, "first request")
	if resp, _, _ := f.do(t, http.MethodGet, "/dies", nil); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("an answer cut short on a reused connection = %d, want 502", resp.StatusCode)
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("the app saw %d requests, want 2: the second is not run again", n)
	}
}

// TestDirectCutBodyIsNotComplete: an upstream that dies inside a chunked
// body must not have its answer end, for the client, as though whole.
func TestDirectCutBodyIsNotComplete(t *testing.T) {
	addr, _ := rawUpstream(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	})
	f := newDirectFixture(t, addr)
	resp, body, err := f.do(t, http.MethodGet, "/x", nil)
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Errorf("status %d, body %q, read error %v; want 200 and a read error", resp.StatusCode, body, err)
	}
}

func TestDirectStreamsAndStopsWhenTheClientLeaves(t *testing.T) {
	canceled := make(chan struct{})
	up := newCountingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(canceled)
	})
	f := newDirectFixture(t, up.URL)
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	c := &http.Client{Transport: &http.Transport{}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The first line arrives while the upstream is still answering: it
	// was flushed, not held until the end.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q (%v)", line, err)
	}
	resp.Body.Close() // unread: the client's connection is closed
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's request was not canceled within 10s of the client leaving")
	}
}

func TestDirectForwardsInterimAnswers(t *testing.T) {
	up := newCountingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "ok")
	})
	f := newDirectFixture(t, up.URL)
	var interim []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		interim = append(interim, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/x", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(interim) != 1 || interim[0] != "103 </a.css>; rel=preload" {
		t.Errorf("interim answers %q, want one 103 with its Link", interim)
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" || resp.Header.Get("Link") != "" {
		t.Errorf("final answer %d %q Link=%q, want 200 ok without the 103's Link", resp.StatusCode, body, resp.Header.Get("Link"))
	}
}

func (d *direct) idleCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.idle)
}

// TestDirectSweepClosesOnlyTheExpired: the sweep closes the connections
// idle too long, keeps the others, and stays set for them.
func TestDirectSweepClosesOnlyTheExpired(t *testing.T) {
	d := newDirect(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}, nil, newBufferPool())
	var clock atomic.Int64
	d.now = func() time.Time { return time.Unix(0, clock.Load()) }
	older, olderPeer := net.Pipe()
	newer, newerPeer := net.Pipe()
	defer olderPeer.Close()
	defer newerPeer.Close()
	d.put(&upConn{Conn: older})
	clock.Add(int64(directIdleTime / 2))
	d.put(&upConn{Conn: newer})
	clock.Add(int64(directIdleTime / 2))
	d.mu.Lock()
	set := d.sweep != nil
	d.mu.Unlock()
	if !set {
		t.Fatal("no sweep is pending for the idle connections")
	}

	d.expire()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.idle) != 1 || d.idle[0].Conn != newer {
		t.Fatalf("after the sweep the pool holds %d connections, want only the newer one", len(d.idle))
	}
	if d.sweep == nil {
		t.Error("no sweep is pending for the connection left")
	} else {
		d.sweep.Stop()
	}
	if _, err := olderPeer.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the expired connection's peer reads %v, want EOF: it was not closed", err)
	}
}

// TestDirectSurvivesAnAppClosingIdleConnections: an app with a short
// keep-alive timeout (Node's is 5 s) closes pooled connections at any
// moment, also just as a request is sent on one; every request must
// still be answered, by the one retry on a newly dialled connection, as
// ReverseProxy's Transport answers them.
func TestDirectSurvivesAnAppClosingIdleConnections(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(ok))
	up.Config.IdleTimeout = time.Millisecond
	up.Start()
	defer up.Close()
	f := newDirectFixture(t, up.URL)
	for _, tc := range []struct {
		name string
		p    *Proxy
	}{{"direct", f.p}, {"ReverseProxy", f.reference}} {
		t.Run(tc.name, func(t *testing.T) {
			f.serving.Store(tc.p)
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			defer c.CloseIdleConnections()
			var wg sync.WaitGroup
			var failed atomic.Int64
			for range 8 {
				wg.Go(func() {
					for range 50 {
						req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/x", nil)
						req.Header.Set("Authorization", "Bearer "+f.token)
						resp, err := c.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := failed.Load(); n != 0 {
				t.Errorf("%d of 400 requests failed", n)
			}
		})
	}
}

// scriptedUpstream serves each connection with serve, which reads the
// requests itself; it returns the upstream's URL.
func scriptedUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	return "http://" + testnet.Serve(t, func(c net.Conn) { serve(c, bufio.NewReader(c)) })
}

// TestDirectDropsAConnectionWithBytesPastTheAnswer: an app that sends a
// body with its answer to a HEAD leaves bytes the next request on that
// connection would read as its own answer; here they are a whole forged
// answer, which must never reach a client.
func TestDirectDropsAConnectionWithBytesPastTheAnswer(t *testing.T) {
	addr := scriptedUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodHead {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"+
					"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	f := newDirectFixture(t, addr)
	if resp, _, _ := f.do(t, http.MethodHead, "/x", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD: %d", resp.StatusCode)
	}
	wantOK(t, f, "GET after the HEAD")
}

// answersThenWhileIdle is an app that answers its first request on a
// connection with "ok" and then, once idle is closed (its connection back
// in the proxy's pool), writes unasked on that connection and reports it
// on the channel returned.
func answersThenWhileIdle(t *testing.T, idle <-chan struct{}, unasked func(net.Conn)) (string, <-chan struct{}) {
	t.Helper()
	sent := make(chan struct{}, 1)
	addr := scriptedUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		select {
		case <-idle:
			unasked(c)
			sent <- struct{}{}
			io.Copy(io.Discard, br)
		case <-time.After(10 * time.Second):
		}
	})
	return addr, sent
}

// TestDirectRetriesAfterAnIdleTimeoutAnswer: an app that says 408 on a
// connection it times out while idle, then closes it, did not answer the
// next request sent on it; the request is retried, not answered 408.
func TestDirectRetriesAfterAnIdleTimeoutAnswer(t *testing.T) {
	idleTooLong := make(chan struct{})
	addr, timedOut := answersThenWhileIdle(t, idleTooLong, func(c net.Conn) {
		// By this app's rule: it says so and closes.
		io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
		c.(*net.TCPConn).CloseWrite()
	})
	f := newDirectFixture(t, addr)
	wantOK(t, f, "first request")
	// The answer reached the client, so its connection is back in the
	// pool, idle, with nothing past the answer.
	close(idleTooLong)
	<-timedOut
	wantOK(t, f, "request after the app timed the connection out")
}

// TestDirectNeverReadsAnUnaskedAnswer: an answer an app sends on an idle
// connection, unasked (a second answer to a request already answered),
// is never read as the answer to a later request, however late it comes.
func TestDirectNeverReadsAnUnaskedAnswer(t *testing.T) {
	idle := make(chan struct{})
	addr, sent := answersThenWhileIdle(t, idle, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
	})
	f := newDirectFixture(t, addr)
	wantOK(t, f, "first request")
	close(idle) // its connection is back in the pool
	<-sent
	// The forged answer is on its way; wait until it is in the socket,
	// where the look before reuse sees it.
	f.p.direct.mu.Lock()
	c := f.p.direct.idle[0]
	f.p.direct.mu.Unlock()
	waitLoud(t, c.look, "after the app sent the forged answer")
	wantOK(t, f, "request after the unasked answer")
}

// TestExchangeTakesA408OnAReusedConnectionForItsClosing: a 408 read on a
// reused connection answered no request of ours (the app timed the
// connection out as the request went); on a new one it is the app's
// answer. A 408 whose body never ends is not waited for: the connection
// is dropped anyway.
func TestExchangeTakesA408OnAReusedConnectionForItsClosing(t *testing.T) {
	for _, tc := range []struct {
		reused bool
		answer string
	}{
		{true, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"},
		{false, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"},
		{true, "HTTP/1.1 408 Request Timeout\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nidle.\r\n"},
	} {
		ours, app := net.Pipe()
		held := make(chan struct{})
		go func() {
			defer app.Close()
			if _, err := http.ReadRequest(bufio.NewReader(app)); err == nil {
				io.WriteString(app, tc.answer)
			}
			<-held // the body, if unended, stays so
		}()
		c := &upConn{Conn: ours, br: bufio.NewReader(ours), bw: bufio.NewWriter(ours), reused: tc.reused}
		req, _ := http.NewRequest(http.MethodGet, "http://app/x", nil)
		type result struct {
			resp *http.Response
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := c.exchange(req)
			done <- result{resp, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("reused %t, %q: exchange still waits", tc.reused, tc.answer)
		}
		switch {
		case tc.reused && !errors.Is(r.err, errIdleTimeout):
			t.Errorf("reused connection: exchange = %v, %v; want errIdleTimeout", r.resp, r.err)
		case !tc.reused && (r.err != nil || r.resp.StatusCode != http.StatusRequestTimeout):
			t.Errorf("new connection: exchange = %v, %v; want the 408", r.resp, r.err)
		}
		close(held)
		ours.Close()
	}
}

// TestPeekerOnASocket: the look before reuse tells a quiet connection from
// one the app wrote on and one it closed, leaves what arrived to be read,
// and allocates nothing (it runs before every reused request).
func TestPeekerOnASocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	app, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	p := newPeeker(c)
	if !p.quiet() {
		t.Fatal("a connection nothing was sent on is not quiet")
	}
	if n := testing.AllocsPerRun(100, func() { p.quiet() }); n != 0 {
		t.Errorf("a look allocates %v times, want 0", n)
	}
	io.WriteString(app, "x")
	waitLoud(t, p, "after the app wrote")
	if b, err := bufio.NewReader(c).ReadByte(); err != nil || b != 'x' {
		t.Errorf("read after the look = %q, %v, want the byte the app wrote", b, err)
	}
	if !p.quiet() {
		t.Error("not quiet once what arrived was read")
	}
	app.Close()
	waitLoud(t, p, "after the app closed")
}

// waitLoud waits for p to see what is on its way: the kernel delivers a
// loopback write or close at once, but not within the writer's call.
func waitLoud(t *testing.T, p *peeker, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.quiet() {
		if time.Now().After(deadline) {
			t.Fatalf("still quiet 10s %s", when)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirectFollowsReverseProxysQueryRule: with GODEBUG urlmaxqueryparams
// set, to any value, ReverseProxy re-encodes every query; direct then
// takes none, so TestDirectForwardsAsReverseProxyDoes holds under it too.
// It runs in a child process, since GODEBUG is read at start.
func TestDirectFollowsReverseProxysQueryRule(t *testing.T) {
	if os.Getenv("GODEBUG") != "" {
		t.Skip("runs its own GODEBUG") // the child, or a GODEBUG of the caller's
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDirectForwardsAsReverseProxyDoes$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=urlmaxqueryparams=10000")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDirectForwardsAsReverseProxyDoes") {
		t.Fatalf("with GODEBUG=urlmaxqueryparams=10000: %v\n%s", err, out)
	}
}

// TestClientGoneAfterAnInterimAnswer: a client that leaves while the app,
// having sent 103 Early Hints, has yet to send its final answer is a
// client gone on both paths, not the app's failure: the direct path took
// the timeout its cancellation set on the connection for the app's.
func TestClientGoneAfterAnInterimAnswer(t *testing.T) {
	addr := scriptedUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
		io.Copy(io.Discard, br) // no final answer, until the proxy closes
	})
	f := newDirectFixture(t, addr)
	for _, p := range []*Proxy{f.p, f.reference} {
		t.Run(map[bool]string{true: "direct", false: "ReverseProxy"}[p.direct != nil], func(t *testing.T) {
			var logs strings.Builder
			var mu sync.Mutex
			// Both share the ReverseProxy, whose error handler is f.p's.
			f.p.cfg.Logger = slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return logs.Write(b)
			}), nil))
			f.p.cfg.Metrics = NewMetrics(prometheus.NewRegistry(), func() float64 { return 0 })
			f.reference.cfg = f.p.cfg
			served := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(served)
				p.ServeHTTP(w, r)
			}))
			defer srv.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error { cancel(); return nil }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, srv.URL+"/page", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			if _, err := (&http.Client{Transport: &http.Transport{}}).Do(req); !errors.Is(err, context.Canceled) {
				t.Fatalf("request = %v; want it cancelled after the 103", err)
			}
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("the proxy still serves a request whose client left")
			}
			gone, upstream := failures(t, p.cfg.Metrics, FailureClientGone), failures(t, p.cfg.Metrics, FailureUpstream)
			mu.Lock()
			defer mu.Unlock()
			if gone != 1 || upstream != 0 || strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("client_gone %v, upstream %v, log %q; want the client gone, no warning", gone, upstream, logs.String())
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// failures reads verifier_proxy_failures_total{reason}.
func failures(t *testing.T, m *Metrics, reason string) float64 {
	t.Helper()
	var v dto.Metric
	if err := m.failures.WithLabelValues(reason).Write(&v); err != nil {
		t.Fatal(err)
	}
	return v.GetCounter().GetValue()
}
