package httpserver

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxH2FrameSize is the largest HTTP/2 frame a client may send: RFC 9113's
// default, which nginx and Envoy also keep. Go's server advertises 1 MiB,
// and its frame reader keeps a buffer the size of the largest frame read
// for as long as the connection lives, so one upload frame made every
// connection that sent it cost a MiB.
const maxH2FrameSize = 16 << 10

// maxH2HeaderBytes bounds the header of an HTTP/2 stream, 32 bytes a
// field counted besides its name and value: 16 KiB, twice what gRPC
// implementations commonly allow for metadata. HTTP/2 with prior
// knowledge is spoken by services, not browsers and their cookies, and
// a stream's header is held while it is queued: with 64 KiB, 20
// connections of 100 streams each carrying 1,850 empty fields took the
// verifier to 867 MB (299 MB once the handler refused them at once).
const maxH2HeaderBytes = 16 << 10

// h2Preface is what an HTTP/2 client sends first (RFC 9113, 3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2cConns serves the connections that open with HTTP/2's preface (h2c
// with prior knowledge), each with a net/http server of its own.
//
// A server's HTTP/2 connections close when idle by a timer that keeps the
// whole connection reachable while it runs, and a connection its client
// drops with a stream open leaves that timer armed: net/http stops it in
// one deferred call and arms it again as the streams are closed in a later
// one (x/net/http2 has the same code). Each such connection then held its
// buffers, up to the MiB of its largest frame, for the idle timeout: 300
// dropped connections kept 296 MB for two minutes. So the servers here run
// no idle timer; a timer of ours, stopped for good when the connection
// closes, shuts the connection's server down after the idle timeout, which
// sends the same graceful GOAWAY. A server of its own per connection is
// what makes that GOAWAY reach one connection: Shutdown is the only way in.
type h2cConns struct {
	idle    time.Duration
	closing atomic.Bool // the listener's server is shutting down

	mu   sync.Mutex
	live map[*h2cConn]struct{}
}

// h2cConn is one connection's state. Its mutex orders the idle timer and
// the shutdown against the connection's state changes and its end.
type h2cConn struct {
	hs     *http.Server  // this connection's alone
	closed chan struct{} // closed once the connection has been served
	resets resetCount

	mu    sync.Mutex
	timer *time.Timer
	up    bool // HTTP/2 has begun: its server's Shutdown sends a GOAWAY
	done  bool // closed: no timer may be armed again
}

// install makes srv hand the connections that open with the HTTP/2
// preface to c, and tell them to go away when it shuts down. It is called
// once, before srv serves.
func (c *h2cConns) install(srv *http.Server) {
	c.live = make(map[*h2cConn]struct{})
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		// net/http hands over an unencrypted HTTP/2 connection, its
		// preface read, under this key (x/net/http2 takes it the same way).
		"unencrypted_http2": c.serve,
		// Present so that net/http does not set up its own HTTP/2 server,
		// which would take the key above; these listeners have no TLS.
		"h2": func(_ *http.Server, tc *tls.Conn, _ http.Handler) { tc.Close() },
	}
	srv.RegisterOnShutdown(c.shutdown)
}

// serve serves one connection handed over by srv, with h, and returns once
// it has closed: srv closes the connection when serve returns.
func (c *h2cConns) serve(srv *http.Server, tc *tls.Conn, h http.Handler) {
	u, ok := tc.NetConn().(interface{ UnencryptedNetConn() net.Conn })
	if !ok {
		tc.Close()
		return
	}
	nc := u.UnencryptedNetConn()
	stopCounting(nc)
	// h carries the connection's context, as net/http gives it to
	// x/net/http2's server.
	ctx := context.Background()
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = bc.BaseContext()
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	conn := &h2cConn{closed: make(chan struct{})}
	conn.hs = &http.Server{
		Handler:        conn.countResets(h),
		Protocols:      &protos,
		BaseContext:    func(net.Listener) context.Context { return ctx },
		ConnState:      func(_ net.Conn, s http.ConnState) { conn.state(s, c) },
		ErrorLog:       srv.ErrorLog,
		MaxHeaderBytes: min(srv.MaxHeaderBytes, maxH2HeaderBytes),
		WriteTimeout:   srv.WriteTimeout,
		HTTP2:          &http.HTTP2Config{MaxReadFrameSize: maxH2FrameSize, MaxConcurrentStreams: maxH2Streams},
		// h is srv's own handler, which has answered OPTIONS * when srv
		// would have.
		DisableGeneralOptionsHandler: true,
		// IdleTimeout and ReadTimeout stay zero, so HTTP/2 runs no idle
		// timer of its own.
	}
	c.mu.Lock()
	c.live[conn] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.live, conn)
		c.mu.Unlock()
	}()
	ln := &oneConn{conn: &replayed{Conn: nc, head: []byte(h2Preface)}, addr: nc.LocalAddr(), shut: make(chan struct{}), closed: conn.closed}
	_ = conn.hs.Serve(ln)
	if ln.conn != nil {
		return // never served (its server failed to start)
	}
	// Serve returns when the server shuts down (the GOAWAY), while the
	// connection may still carry streams.
	<-conn.closed
}

// state follows the connection's states, reported by its server on the
// goroutine that serves it: Active when a stream opens on an idle
// connection, Idle once HTTP/2 has begun and each time the last open
// stream closes, Closed last.
func (conn *h2cConn) state(s http.ConnState, c *h2cConns) {
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if conn.done {
		return
	}
	switch s {
	case http.StateActive:
		if conn.timer != nil {
			conn.timer.Stop()
		}
	case http.StateIdle:
		// up is set and closing read under the lock that shutdown takes
		// to read up after setting closing: one of the two sees the
		// other, so no connection misses its GOAWAY.
		conn.up = true
		switch {
		case c.closing.Load():
			// Handed over after the shutdown had told the others.
			go conn.goAway()
		case conn.timer == nil:
			conn.timer = time.AfterFunc(c.idle, conn.goAway)
		default:
			conn.timer.Reset(c.idle)
		}
	case http.StateClosed:
		conn.done = true
		if conn.timer != nil {
			conn.timer.Stop()
		}
		close(conn.closed)
	}
}

// goAway sends the connection a graceful GOAWAY: the streams it has begun
// finish, and it closes after the last. Shutdown is asked not to wait for
// that (its context is already done).
func (conn *h2cConn) goAway() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = conn.hs.Shutdown(ctx)
}

// shutdown tells every HTTP/2 connection to go away; it runs when the
// listener's server shuts down. One whose HTTP/2 has not begun is told as
// it begins.
func (c *h2cConns) shutdown() {
	c.closing.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.live {
		conn.mu.Lock()
		if conn.up && !conn.done {
			go conn.goAway()
		}
		conn.mu.Unlock()
	}
}

// served is the number of connections being served, for tests.
func (c *h2cConns) served() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

// oneConn is a listener that yields one connection, then blocks until the
// connection has been served or the listener is closed.
type oneConn struct {
	conn   net.Conn // until accepted; Accept runs on one goroutine
	addr   net.Addr
	once   sync.Once
	shut   chan struct{}
	closed <-chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	if c := l.conn; c != nil {
		l.conn = nil
		return c, nil
	}
	select {
	case <-l.shut:
	case <-l.closed:
	}
	return nil, net.ErrClosed
}

// Close ends Accept's wait; the connection it yielded stays open.
func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.shut) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// replayed reads head, then the connection: it gives back what net/http
// read before handing the connection over.
type replayed struct {
	net.Conn
	head []byte // read on one goroutine, before HTTP/2's reader starts
}

func (r *replayed) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
