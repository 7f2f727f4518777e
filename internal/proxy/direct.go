package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// direct forwards the common case, a bodiless GET, HEAD, OPTIONS or TRACE
// to a plain-HTTP/1.1 upstream, on the handler's own goroutine: it writes
// the request and reads the answer with net/http's own Request.Write and
// ReadResponse, on connections it keeps idle itself. The Transport behind
// ReverseProxy hands every exchange to two goroutines per connection (one
// writing, one reading, the second parked on a read of its own between
// exchanges) and clones the request; on a 2-core machine those handoffs
// and copies were most of what the proxy cost beyond the system calls
// both must make. Everything else (bodies, upgrades, h2c, TLS upstreams)
// goes through ReverseProxy, whose retry and body rules it would take
// more than this to match.
//
// The requests it takes are the ones net/http's Transport itself retries
// on a fresh connection after a reused one fails before answering, and so
// does direct: once. Where the Transport keeps a read pending on every
// idle connection, direct looks at one as it takes it (quiet): a
// connection the app closed, or sent anything on after its answer, is
// closed instead of used, so nothing an app sent unasked before the
// connection is taken again is read as the answer to a later request
// (bytes that come later still are, as with net/http's Transport: a body
// an app wrongly sends, late, after its answer to a HEAD cannot be told
// from the next answer). A 408 read on a reused connection (the
// app timing it out just as the request went) is taken for the closed
// connection it announces.
type direct struct {
	addr     string // host:port
	dialer   net.Dialer
	rewrite  func(*httputil.ProxyRequest)
	buffers  *bufferPool
	maxIdle  int
	idleTime time.Duration
	now      func() time.Time

	// noQuery: ReverseProxy re-encodes every query (GODEBUG
	// urlmaxqueryparams is set), so direct takes none.
	noQuery bool

	mu    sync.Mutex
	idle  []*upConn   // most recently used last
	sweep *time.Timer // pending while idle is not empty
}

// upConn is one connection to the upstream, with its buffers.
type upConn struct {
	net.Conn
	head      headLimit // under br: bounds the answer's head
	br        *bufio.Reader
	bw        *bufio.Writer
	look      *peeker // whether the app sent anything while idle
	idleSince time.Time
	reused    bool
}

// directDefaults mirror NewTransport's: a pool as large as the
// concurrency we serve, and idle connections closed after 90 seconds.
const (
	directMaxIdle  = 1024
	directIdleTime = 90 * time.Second
)

func newDirect(upstream *url.URL, rewrite func(*httputil.ProxyRequest), buffers *bufferPool) *direct {
	host := upstream.Host
	if upstream.Port() == "" {
		host = net.JoinHostPort(upstream.Hostname(), "80")
	}
	return &direct{
		addr: host, rewrite: rewrite, buffers: buffers,
		dialer:  net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: directMaxIdle, idleTime: directIdleTime, now: time.Now,
		noQuery: reencodesEveryQuery(),
	}
}

// reencodesEveryQuery reports whether ReverseProxy, under this process's
// GODEBUG, re-encodes every query and not only those queryAsIs declines:
// it does whenever urlmaxqueryparams is set, to any value. It asks a
// ReverseProxy, which is exact whatever the GODEBUG came from (the
// environment, or the module's defaults).
func reencodesEveryQuery() bool {
	const q = "b&a"
	var got string
	rp := &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { got = pr.Out.URL.RawQuery },
		Transport:    refuseAll{},
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {},
	}
	rp.ServeHTTP(discardAnswer{}, &http.Request{
		Method: http.MethodGet, URL: &url.URL{Path: "/", RawQuery: q}, Header: http.Header{},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "probe",
	})
	return got != q
}

// discardAnswer is a ResponseWriter that keeps nothing.
type discardAnswer struct{}

func (discardAnswer) Header() http.Header         { return http.Header{} }
func (discardAnswer) Write(p []byte) (int, error) { return len(p), nil }
func (discardAnswer) WriteHeader(int)             {}

// refuseAll is a transport that sends nothing.
type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("proxy: probe only")
}

// directUpstream reports whether the upstream suits direct: plain HTTP.
func directUpstream(u *url.URL) bool {
	return u.Scheme == "http" && u.Host != ""
}

// takes reports whether r is a request direct forwards: HTTP/1, no body,
// a method net/http's Transport would replay, no upgrade (a WebSocket
// goes through ReverseProxy; any other upgrade was dropped before), and
// a query ReverseProxy passes as it is (see queryAsIs).
func (d *direct) takes(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	if _, ok := r.Header["Upgrade"]; ok {
		return false
	}
	return r.URL.RawQuery == "" || !d.noQuery && queryAsIs(r.URL.RawQuery)
}

// queryAsIs reports whether ReverseProxy sends the query q on unchanged.
// It re-encodes, against parameter smuggling, one with a ';', a malformed
// escape or more than 10000 parameters (net/http/httputil's
// cleanQueryParams), dropping what does not parse: such a query goes
// through it, so the app sees the same query on both paths.
func queryAsIs(q string) bool {
	if strings.Count(q, "&") >= maxQueryParams {
		return false
	}
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

// maxQueryParams is net/url's default bound on a query's parameters.
const maxQueryParams = 10000

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// errDirectSwitch is an upstream's 101 to a request that asked for no
// switch.
var errDirectSwitch = errors.New("proxy: upstream switched protocols unasked")

// serve forwards r and copies the answer to w. It returns a non-nil error
// only when nothing but a 1xx was written to w, for the caller to answer.
func (d *direct) serve(w http.ResponseWriter, r *http.Request) error {
	out := d.outgoing(r)
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		c, err := d.get(ctx, attempt > 0)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
		resp, err := c.exchange(out)
		if err == nil {
			err = d.answer(w, c, resp, stop)
			if err != nil && ctx.Err() != nil {
				// The final head, after a 1xx, failed on the deadline
				// the client's leaving set: no fault of the app's.
				return ctx.Err()
			}
			return err
		}
		stop()
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err() // the client went away
		}
		// A reused connection the upstream closed while it was idle
		// fails before any answer: the request is replayable, try once
		// on a newly dialled one, as net/http's Transport does. Once an
		// answer has begun, the app has run the request: it is not run
		// twice.
		var early beforeAnswer
		if !c.reused || attempt > 0 || !errors.As(err, &early) {
			return err
		}
	}
}

// outgoing is the request as ReverseProxy would send it: its header
// cloned, hop-by-hop and forwarding headers removed, "TE: trailers" kept,
// then the proxy's rewrite (upstream URL, X-Forwarded-*, identity).
func (d *direct) outgoing(r *http.Request) *http.Request {
	out := new(http.Request)
	*out = http.Request{
		Method: r.Method, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header.Clone(), Host: r.Host,
	}
	u := *r.URL
	out.URL = &u
	removeHopByHop(out.Header)
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		out.Header.Set("Te", "trailers")
	}
	for _, h := range forwarding {
		delete(out.Header, h)
	}
	d.rewrite(&httputil.ProxyRequest{In: r, Out: out})
	if _, ok := out.Header["User-Agent"]; !ok {
		// Request.Write would send Go's own.
		out.Header["User-Agent"] = []string{""}
	}
	return out
}

// errIdleTimeout is a 408 found on a reused connection: the app timed the
// connection out while it was idle, before our request (some servers say
// so before closing), and did not answer the request at all. It is
// retried like a closed connection; a 408 on a new one goes to the client.
var errIdleTimeout = errors.New("proxy: upstream timed out the idle connection")

// beforeAnswer is an exchange that failed before the app answered
// anything: writing the request, waiting for the answer's first byte, or
// finding errIdleTimeout. Only such a failure is retried.
type beforeAnswer struct{ err error }

func (e beforeAnswer) Error() string { return e.err.Error() }
func (e beforeAnswer) Unwrap() error { return e.err }

// exchange writes out and reads the answer's head. 1xx answers other than
// 101 come back too; the caller forwards them and reads on.
func (c *upConn) exchange(out *http.Request) (*http.Response, error) {
	if err := out.Write(c.bw); err != nil {
		return nil, beforeAnswer{err}
	}
	if err := c.bw.Flush(); err != nil {
		return nil, beforeAnswer{err}
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, beforeAnswer{err}
	}
	c.head.bound(c.br)
	resp, err := http.ReadResponse(c.br, out)
	if err == nil && c.reused && resp.StatusCode == http.StatusRequestTimeout {
		// Its body is not read: the connection is closed, and a body
		// that never ended would hold the request.
		return nil, beforeAnswer{errIdleTimeout}
	}
	return resp, err
}

// answer copies resp (and any further answer after a 1xx) to w, then
// returns c to the pool if the exchange left it clean. stop cancels the
// deadline that r's cancellation would set.
func (d *direct) answer(w http.ResponseWriter, c *upConn, resp *http.Response, stop func() bool) error {
	reuse := false
	defer func() {
		// Bytes past the answer are no answer to anything we sent: an
		// app that wrote them (a body to a HEAD) would have the next
		// request read them as its own.
		if stop() && reuse && c.br.Buffered() == 0 {
			d.put(c)
			return
		}
		c.Close()
	}()
	var err error
	for resp.StatusCode >= 100 && resp.StatusCode < 200 {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return errDirectSwitch
		}
		forwardInterim(w, resp)
		c.head.bound(c.br)
		if resp, err = http.ReadResponse(c.br, resp.Request); err != nil {
			return err
		}
	}
	c.head.left = -1
	if !validStatus(resp.StatusCode) {
		return errBadStatus
	}
	removeHopByHop(resp.Header)
	dropOwnAnswerHeaders(resp.Header)
	h := w.Header()
	addHeader(h, resp.Header)
	if len(resp.Trailer) > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	if err := d.copyBody(w, resp); err != nil {
		// As ReverseProxy does: a body cut short by either side must
		// not end as though complete (a chunked answer would get its
		// last chunk), so the client's connection is dropped.
		panic(http.ErrAbortHandler)
	}
	reuse = !resp.Close
	for k, vv := range resp.Trailer {
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
	return nil
}

// forwardInterim sends a 1xx answer on to the client, as ReverseProxy
// does: its headers are the 1xx's alone.
func forwardInterim(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	// What the final answer had before (X-Request-Id) stays on it; only
	// what the interim answer brought goes after it.
	had := map[string]int{}
	for k := range resp.Header {
		if v, ok := h[k]; ok {
			had[k] = len(v)
		}
	}
	addHeader(h, resp.Header)
	w.WriteHeader(resp.StatusCode)
	for k := range resp.Header {
		if n, ok := had[k]; ok {
			h[k] = h[k][:n:n]
		} else {
			delete(h, k)
		}
	}
}

// addHeader adds src's values to dst, taking over src's slices where dst
// has none: src is an answer read for this request alone.
func addHeader(dst, src http.Header) {
	for k, vv := range src {
		if have, ok := dst[k]; ok {
			dst[k] = append(have, vv...)
		} else {
			dst[k] = vv
		}
	}
}

// copyBody copies resp's body to w to its end, flushing after each read
// when the upstream streams (no Content-Length).
func (d *direct) copyBody(w http.ResponseWriter, resp *http.Response) error {
	var rc *http.ResponseController // made only for a stream
	if resp.ContentLength == -1 {
		rc = http.NewResponseController(w)
	}
	buf := d.buffers.Get()
	defer d.buffers.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if rc != nil {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// get returns an idle connection, the most recently used first, or dials
// one; fresh dials one in any case (a retry: the idle ones may have been
// closed by the app as the first was).
func (d *direct) get(ctx context.Context, fresh bool) (*upConn, error) {
	if !fresh {
		if c := d.idleConn(); c != nil {
			return c, nil
		}
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	c := &upConn{Conn: conn, bw: bufio.NewWriterSize(conn, 4<<10), look: newPeeker(conn)}
	c.head = headLimit{r: conn, left: -1}
	c.br = bufio.NewReaderSize(&c.head, 4<<10)
	return c, nil
}

// headLimit reads from r at most left bytes while left >= 0, as
// Transport's MaxResponseHeaderBytes: set (bound) before each head of an
// answer is read, a 1xx one included, as ReverseProxy's Transport does,
// and off (-1) once the final one is. The bytes it counts include what the
// buffer above reads ahead, up to its 4 KiB.
type headLimit struct {
	r    io.Reader
	left int64
}

// bound allows the next head maxUpstreamHeaderBytes, br's buffered bytes
// included.
func (l *headLimit) bound(br *bufio.Reader) {
	l.left = max(maxUpstreamHeaderBytes-int64(br.Buffered()), 0)
}

var errHeadTooLarge = fmt.Errorf("proxy: upstream answer's head exceeds %d bytes", maxUpstreamHeaderBytes)

func (l *headLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// idleConn takes the most recently used idle connection that has neither
// idled too long nor been closed or written to by the app since its last
// answer, closing those that have; nil if none is left.
func (d *direct) idleConn() *upConn {
	for {
		c := d.popIdle()
		if c == nil {
			return nil
		}
		if d.now().Sub(c.idleSince) < d.idleTime && c.look.quiet() {
			c.reused = true
			return c
		}
		c.Close()
	}
}

// popIdle takes the most recently used idle connection off the pool.
func (d *direct) popIdle() *upConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.idle)
	if n == 0 {
		return nil
	}
	c := d.idle[n-1]
	d.idle[n-1] = nil
	d.idle = d.idle[:n-1]
	return c
}

// put returns c to the pool, and makes sure a sweep will close it once
// it has idled too long, as the Transport's timers would: an app that
// closes idle connections itself would otherwise leave them half-closed
// here while the verifier sees no traffic.
func (d *direct) put(c *upConn) {
	c.idleSince = d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.idle) >= d.maxIdle {
		c.Close()
		return
	}
	d.idle = append(d.idle, c)
	if d.sweep == nil {
		d.sweep = time.AfterFunc(d.idleTime, d.expire)
	}
}

// expire closes the connections that have idled too long and, while
// others remain, sets the next sweep for when the oldest will have.
func (d *direct) expire() {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0 // the pool is oldest first: its expired ones are a prefix
	for n < len(d.idle) && now.Sub(d.idle[n].idleSince) >= d.idleTime {
		d.idle[n].Close()
		n++
	}
	d.idle = append(d.idle[:0], d.idle[n:]...)
	clear(d.idle[len(d.idle) : len(d.idle)+n])
	if len(d.idle) == 0 {
		d.sweep = nil
		return
	}
	d.sweep.Reset(d.idleTime - now.Sub(d.idle[0].idleSince))
}

// hopByHop are the headers that describe one connection, never forwarded
// (RFC 9110 section 7.6.1), as ReverseProxy drops them.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// forwarding are the headers ReverseProxy removes before a Rewrite, which
// sets its own.
var forwarding = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for _, sf := range strings.Split(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}
