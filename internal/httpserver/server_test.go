package httpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveUntilStop serves h behind the access log on a loopback port and
// returns its address, its log, and a stop that ends serving and returns
// what Serve did.
func serveUntilStop(t *testing.T, h http.Handler, opts Options) (addr string, log *syncBuffer, stop func() error) {
	t.Helper()
	logger, buf := newTestLogger()
	srv := New("test", logger, AccessLog(logger, h), opts)
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(cancel)
	return srv.Addr().String(), buf, func() error { cancel(); return <-served }
}

// tunnel answers 101 and then, as a reverse proxy's WebSocket tunnel does,
// copies until its client leaves or the request's context ends. It closes
// up once the tunnel is open.
func tunnel(up chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		stop := context.AfterFunc(r.Context(), func() { conn.Close() })
		defer stop()
		close(up)
		_, _ = io.Copy(io.Discard, brw)
	})
}

// openTunnel upgrades a connection to addr and returns it once the
// server's handler holds the tunnel.
func openTunnel(t *testing.T, addr string, up <-chan struct{}) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade = %v, %v; want 101", res, err)
	}
	<-up
	return c
}

// accessLines counts the access log's lines for path.
func accessLines(t *testing.T, log *syncBuffer, path string) int {
	t.Helper()
	n := 0
	for _, l := range logLinesWithMsg(t, log, "request") {
		if l["path"] == path {
			n++
		}
	}
	return n
}

// A hijacked connection (a WebSocket tunnel), which http.Server.Shutdown
// neither waits for nor ends, gets the grace like any request: Serve
// returns once its client has left, with the request's access log line
// written (the binary exits next). Before, Serve returned at once.
func TestShutdownWaitsForATunnel(t *testing.T) {
	up := make(chan struct{})
	addr, log, stop := serveUntilStop(t, tunnel(up), Options{ShutdownTimeout: time.Minute})
	c := openTunnel(t, addr, up)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// Once the listener refuses, the shutdown has begun.
	waitRefused(t, addr)
	if _, err := fmt.Fprint(c, "still open\n"); err != nil {
		t.Fatalf("the tunnel during the grace: %v", err)
	}
	c.Close()
	if err := <-stopped; err != nil {
		t.Fatalf("Serve = %v, want nil: the tunnel ended within the grace", err)
	}
	if n := accessLines(t, log, "/ws"); n != 1 {
		t.Errorf("access log lines for the tunnel when Serve returned = %d, want 1", n)
	}
}

// A tunnel still open when the grace runs out is ended (its request's
// context cancelled), and Serve returns after its handler has, with its
// line written.
func TestShutdownEndsATunnelAfterTheGrace(t *testing.T) {
	up := make(chan struct{})
	addr, log, stop := serveUntilStop(t, tunnel(up), Options{ShutdownTimeout: 200 * time.Millisecond})
	c := openTunnel(t, addr, up)
	if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve = %v, want the grace's deadline exceeded", err)
	}
	if n := accessLines(t, log, "/ws"); n != 1 {
		t.Errorf("access log lines for the tunnel when Serve returned = %d, want 1", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("reading the tunnel after Serve returned = %v, want EOF: the server closed it", err)
	}
}

// A request the grace cut short (its context cancelled, its connection
// closed) has its line written by the time Serve returns; before, Serve
// returned as Close did, and the handler logged after.
func TestShutdownWaitsForTheRequestsItCut(t *testing.T) {
	started := make(chan struct{})
	addr, log, stop := serveUntilStop(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		// The work a proxy's error path does after the cancel, before
		// the line is logged. Serve waits for it however long it takes
		// (up to handlerDrain); the pause only makes the handler lose
		// the race with a Serve that does not wait.
		time.Sleep(50 * time.Millisecond)
		w.WriteHeader(StatusClientClosedRequest)
	}), Options{ShutdownTimeout: 200 * time.Millisecond})
	go func() {
		if res, err := http.Get("http://" + addr + "/slow"); err == nil {
			res.Body.Close()
		}
	}()
	<-started
	if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve = %v, want the grace's deadline exceeded", err)
	}
	if n := accessLines(t, log, "/slow"); n != 1 {
		t.Errorf("access log lines for the cut request when Serve returned = %d, want 1", n)
	}
}

// waitRefused waits until addr refuses connections.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 10s into the shutdown", addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientGoneIsNeverAnswered: a request its handler ends with
// ClientGone is logged with 499 and dropped, never answered. net/http
// cancels a request whose client half-closes its side, and that client,
// still reading, got "HTTP/1.1 499" on the wire.
func TestClientGoneIsNeverAnswered(t *testing.T) {
	addr, log, _ := serveUntilStop(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		ClientGone(w)
	}), Options{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /half HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Errorf("half-closed client read %q, %v; want the connection closed with nothing on it", got, err)
	}
	// The line is written before the connection is dropped.
	var status, aborted any
	for _, l := range logLinesWithMsg(t, log, "request") {
		if l["path"] == "/half" {
			status, aborted = l["status"], l["aborted"]
		}
	}
	if status != float64(StatusClientClosedRequest) || aborted != true {
		t.Errorf("access log status, aborted = %v, %v; want %d, true", status, aborted, StatusClientClosedRequest)
	}
}

// Conns counts the connections the server holds: each one accepted, until
// it closes or its handler hijacks it.
func TestConnsCountsOpenConnections(t *testing.T) {
	s, addr := serveServer(t, Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hijack" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				t.Cleanup(func() { c.Close() })
			}
			return
		}
	}))
	waitConns := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for s.Conns() != want {
			if time.Now().After(deadline) {
				t.Fatalf("Conns() = %d, want %d", s.Conns(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	get := func(c net.Conn, path string) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		get(c, "/")
		conns = append(conns, c)
	}
	if got := s.Conns(); got != 3 {
		t.Fatalf("Conns() = %d with three connections answered and open, want 3", got)
	}
	conns[0].Close()
	waitConns(2)
	get(conns[1], "/hijack")
	waitConns(1)
	conns[2].Close()
	waitConns(0)
}
