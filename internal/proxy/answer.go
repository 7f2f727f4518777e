package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/palisade-auth/palisade/internal/httpserver"
)

// answerWriter is the writer ReverseProxy answers a request through. It
// puts the request's X-Request-Id back on the final answer: ReverseProxy
// clears the header map after each 1xx it relays (103 Early Hints), and
// the id, set before the proxy ran, went with it. And it closes the
// connection after an answer whose HTTP/1.1 request body had not been
// read to its end when the answer began (see duplexBody).
type answerWriter struct {
	http.ResponseWriter
	id   string      // "" when the request has none
	body *duplexBody // nil when the body is not forwarded as one
}

// newAnswerWriter returns w wrapped when r needs it, and puts an HTTP/1.1
// request's body in full duplex: the app may answer before it has read
// the body, and net/http, once an HTTP/1.1 answer's head goes out, read
// off and threw away up to 256 KiB of a body not yet read, which the
// transport was still forwarding, so the app got the upload with a hole
// in it and a clean end. A client that will not read until it has sent
// everything is bounded by the body deadlines, as any stalled upload is.
// The body, when there is one, is also returned. An HTTP/2 request's body,
// full duplex by nature, is read by the transport through a duplexOut
// when http1 says the app's transport is HTTP/1.1, whose failures only
// that can pass on; to an h2c app, whose transport closes the body, it
// goes as a streamBody, the cheaper for a gRPC call.
func newAnswerWriter(w http.ResponseWriter, r *http.Request, http1 bool, bufs httputil.BufferPool) (http.ResponseWriter, *duplexBody) {
	aw := answerWriter{ResponseWriter: w, id: httpserver.RequestIDFromContext(r.Context())}
	if r.ContentLength != 0 {
		aw.body = &duplexBody{ReadCloser: r.Body, left: r.ContentLength, w: w, r: r}
		if r.ProtoMajor == 1 {
			http.NewResponseController(w).EnableFullDuplex()
		}
		if r.ProtoMajor == 1 || http1 {
			aw.body.out = newDuplexOut(aw.body, bufs)
		}
		r.Body = aw.body // as http.MaxBytesReader is used
	}
	if aw.id == "" && aw.body == nil {
		return w, nil
	}
	return &aw, aw.body
}

func (w *answerWriter) WriteHeader(code int) {
	if code == http.StatusContinue && w.body != nil {
		// net/http tells the client to continue itself, on the first read
		// of its body, which the transport makes once the app has sent
		// this 100 (or its wait for one is over): passed on, it would be
		// a second. Dropping it only once that read had begun left a race,
		// the read beginning between the look and the write: a probe saw
		// two 100s in 1 request of 8,000 at 200 clients.
		return
	}
	if code >= 200 {
		h := w.Header()
		if w.id != "" && !slices.Contains(h[httpserver.HeaderRequestID], w.id) {
			h[httpserver.HeaderRequestID] = append([]string{w.id}, h[httpserver.HeaderRequestID]...)
		}
		if w.body != nil && !w.body.ended.Load() && w.body.r.ProtoMajor == 1 {
			// In full duplex, net/http reuses a connection whose body
			// then fails (a stalled or malformed one), and whatever of it
			// remains would be read as the next request.
			h.Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer (flushes,
// deadlines, full duplex, the WebSocket hijack).
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// duplexBody is a request's body, forwarded in full duplex, that tells
// whether it has been read to its end: by its length, or its last chunk
// (HTTP/2: the end of its stream). The transport reads the end before it
// passes it on, so an app that answers after the whole body answers a body
// that has ended.
type duplexBody struct {
	io.ReadCloser
	left     int64       // bytes still to come when the length is known, else -1
	lengthIn atomic.Bool // left has reached 0
	ended    atomic.Bool
	cut      atomic.Bool                 // end ended it first
	closed   atomic.Bool                 // Close, by the proxy, ended it first
	conn     atomic.Pointer[watchedConn] // the connection to the app it goes on, when watched
	failed   atomic.Bool                 // a read failed on the client's side: its body was malformed or cut short
	out      *duplexOut                  // what the transport reads of it; nil for a streamBody
	w        http.ResponseWriter
	r        *http.Request
}

// end, before the body's end, ends it (httpserver.EndBody), so that a
// read waiting for the client's next bytes returns. It must run while the
// handler does, and only once the app's answer has been copied: net/http
// cancels the request when a read fails, which would cut an answer still
// being read from the app.
func (b *duplexBody) end() {
	if !b.ended.Load() && b.cut.CompareAndSwap(false, true) {
		httpserver.EndBody(b.w, b.r)
	}
}

// traced returns r with the hook that tells b which connection to the app
// carries the body, when it goes through a duplexOut.
func (b *duplexBody) traced(r *http.Request) *http.Request {
	if b.out == nil {
		return r
	}
	return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*watchedConn); ok {
				b.conn.Store(c)
				c.out.Store(b.out)
			}
		},
	}))
}

// watchedConn is a connection to an HTTP/1.1 app that, closed by the
// transport while an upload goes on it (the app closed or broke it, or
// the exchange ended), closes that upload's duplexOut: net/http's
// HTTP/1.1 transport does not close the body itself then, and waits for
// the read it has under way.
type watchedConn struct {
	net.Conn
	out atomic.Pointer[duplexOut]
}

func (c *watchedConn) Close() error {
	if o := c.out.Swap(nil); o != nil {
		o.closeWith(errAppConnClosed)
	}
	return c.Conn.Close()
}

// watchedDial dials watchedConns.
func watchedDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c}, nil
	}
}

// duplexOut is the body the transport sends of a request whose body is a
// duplexBody. It reads the client's body in a goroutine of its own, one
// read at a time and only when the transport asks (so a 100 Continue still
// waits for the app), and its Close, by the transport once it is done with
// the body (the app answered, failed, or reset the stream, or its
// connection closed), returns a read waiting on the client at once. The
// transport waits for that read, and when the client had paused its upload
// it waited for the idle timeout, whose 408 then blamed the client for the
// app's failure; ending the client's body instead cancels the request,
// which would cut an answer still being copied, and cannot tell an answer
// from a failure after a 1xx. The client's body and the request are left
// as they are, for finish to end once the answer is out.
type duplexOut struct {
	in     *duplexBody
	bufs   httputil.BufferPool
	ask    chan int      // the transport wants up to this many bytes
	got    chan pumped   // what the goroutine read for it
	copied chan struct{} // the read has copied what it got: the buffer is free
	stop   chan struct{} // closed by Close
	why    error         // what reads get once stop is closed, set before
	exited chan struct{} // closed when the goroutine has returned
	err    error         // why it returned, set before exited is closed

	mu               sync.Mutex
	running, stopped bool
}

type pumped struct {
	buf []byte
	err error
}

// errUploadClosed is what a read of a duplexOut gets once the transport
// has closed it; errAppConnClosed once the connection to the app the
// upload went on has closed, which is what the log should say of an app
// that died mid-upload.
var (
	errUploadClosed  = errors.New("proxy: read of an upload the transport closed")
	errAppConnClosed = errors.New("proxy: the connection to the app closed during the upload")
)

func newDuplexOut(in *duplexBody, bufs httputil.BufferPool) *duplexOut {
	return &duplexOut{in: in, bufs: bufs, ask: make(chan int), got: make(chan pumped), copied: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
}

func (o *duplexOut) Read(p []byte) (int, error) {
	if !o.start() {
		return 0, o.why
	}
	select {
	case o.ask <- len(p):
	case <-o.stop:
		return 0, o.why
	case <-o.exited:
		return 0, o.err
	}
	select {
	case r := <-o.got:
		n := copy(p, r.buf)
		o.copied <- struct{}{}
		return n, r.err
	case <-o.stop:
		return 0, o.why
	}
}

// start runs the goroutine on the first read, and reports whether the
// body is still open.
func (o *duplexOut) start() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return false
	}
	if !o.running {
		o.running = true
		go o.pump()
	}
	return true
}

// pump reads the client's body for each read the transport asks for,
// into a buffer of its own (a read cut off by Close leaves it writing),
// which it reuses or gives back only once the read it went to has copied
// it: the last bytes come with io.EOF, and a Close can come between the
// handing over and the copy. A buffer given back early went to another
// request's upload or answer while this one's was copied from it.
func (o *duplexOut) pump() {
	buf := o.bufs.Get()
	defer func() {
		o.bufs.Put(buf)
		if o.err == nil {
			o.err = o.why // it returned for stop
		}
		close(o.exited)
	}()
	for {
		var n int
		select {
		case n = <-o.ask:
		case <-o.stop:
			return
		}
		k, err := o.in.Read(buf[:min(n, len(buf))])
		select {
		case o.got <- pumped{buf[:k], err}:
			<-o.copied
		case <-o.stop:
			return
		}
		if err != nil {
			o.err = err
			return
		}
	}
}

// Close returns the read under way, and every later one, at once; the
// goroutine's read of the client's body goes on until finish ends it.
func (o *duplexOut) Close() error {
	o.closeWith(errUploadClosed)
	return nil
}

// closeWith is Close, whose reads get err if it is the first.
func (o *duplexOut) closeWith(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped {
		o.stopped = true
		o.why = err
		close(o.stop)
	}
}

// wait, once the client's body has been ended, returns when the
// goroutine has.
func (o *duplexOut) wait() {
	o.Close()
	o.mu.Lock()
	running := o.running
	o.mu.Unlock()
	if running {
		<-o.exited
	}
}

// closesUpload is the app's answer to a request with a duplexBody, whose
// Close, by ReverseProxy once it has copied the answer, closes the body
// the transport sends, whatever of it the client has yet to send.
type closesUpload struct {
	io.ReadCloser
	out *duplexOut
}

func (b *closesUpload) Close() error {
	b.out.Close()
	return b.ReadCloser.Close()
}

// finish, once ReverseProxy has returned, ends the body and closes it,
// reading its end if that has come: net/http's server, in full duplex,
// takes a body it reads to its end after the handler for the next
// request's, reads on and panics (golang/go#68560).
func (b *duplexBody) finish() {
	if b.out != nil && b.r.ProtoMajor == 2 && b.lengthIn.Load() {
		b.awaitStreamEnd()
	}
	b.end()
	if b.out == nil {
		b.ReadCloser.Close()
		return
	}
	b.out.wait()
	b.ReadCloser.Close()
	if c := b.conn.Load(); c != nil {
		c.out.CompareAndSwap(b.out, nil)
	}
}

// awaitStreamEnd, for an HTTP/2 body whose declared length is in, reads
// what is left of its stream, nothing but its end or the client's
// trailers, within the body deadlines, before the handler returns. Ended
// there, the stream is reset, and trailers the client sends after the
// reset make Go's server end the whole connection, every other stream on
// it (golang/go#58286): an HTTP/1.1 app answers as soon as the length is
// in, and its transport lets go of the upload 50 ms after.
func (b *duplexBody) awaitStreamEnd() {
	b.out.wait() // the transport's read for the end may be under way
	if !b.ended.Load() {
		_, _ = io.Copy(io.Discard, b)
	}
}

// Close ends the client's body for the transport (see streamBody): its
// reads then fail, which is not the client's doing.
func (b *duplexBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

func (b *duplexBody) Read(p []byte) (int, error) {
	// An HTTP/1.1 body whose whole length is in has ended: the
	// transport's last read, to find the end, must not reach a body the
	// handler may have closed. An HTTP/2 body is read to the end of its
	// stream, past its length: the client may still send trailers (see
	// awaitStreamEnd).
	http1 := b.r.ProtoMajor == 1
	if b.left == 0 && http1 {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		if b.left == 0 {
			b.lengthIn.Store(true)
		}
	}
	switch {
	case err == io.EOF || b.left == 0 && http1:
		b.ended.Store(true)
	case err != nil && !b.cut.Load() && !b.closed.Load() && !errors.Is(err, httpserver.ErrBodyTimeout):
		b.failed.Store(true)
	}
	return n, err
}

// settle, for a request the client's side cancelled, waits for the read
// of its body under way, if any, to return. net/http cancels a
// request whose body read fails from inside the read, and the transports
// return on the cancellation, HTTP/2's without waiting for the read; the
// cause it returns with (a body timeout, BodyTimedOut) must be known
// before the failure is put down to the client leaving. The wait is
// short: the read is failing, or the connection is closed (the server's
// shutdown closes it after its grace).
func settle(w http.ResponseWriter, r *http.Request) {
	if b := duplexOf(w, r); b != nil && b.out != nil && r.Context().Err() != nil {
		b.out.wait()
	}
}

// duplexOf is the duplexBody of r, answered through w, or nil: r's
// own (ServeHTTP's request), or the one w holds (for ReverseProxy's).
func duplexOf(w http.ResponseWriter, r *http.Request) *duplexBody {
	if b, ok := r.Body.(*duplexBody); ok {
		return b
	}
	if aw, ok := w.(*answerWriter); ok {
		return aw.body
	}
	return nil
}

// bodyFailed reports whether the duplexBody of r, answered through w,
// failed on the client's side (malformed framing, or cut short): a
// transport error that follows is the client's doing, not the app's.
func bodyFailed(w http.ResponseWriter, r *http.Request) bool {
	b := duplexOf(w, r)
	return b != nil && b.failed.Load()
}
