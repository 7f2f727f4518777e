package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
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
	body *duplexBody // nil when no HTTP/1.1 body is forwarded
}

// newAnswerWriter returns w wrapped when r needs it, and puts an HTTP/1.1
// request's body in full duplex: the app may answer before it has read
// the body, and net/http, once an HTTP/1.1 answer's head goes out, read
// off and threw away up to 256 KiB of a body not yet read, which the
// transport was still forwarding, so the app got the upload with a hole
// in it and a clean end. A client that will not read until it has sent
// everything is bounded by the body deadlines, as any stalled upload is.
// The body, when there is one, is also returned.
func newAnswerWriter(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *duplexBody) {
	aw := answerWriter{ResponseWriter: w, id: httpserver.RequestIDFromContext(r.Context())}
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		http.NewResponseController(w).EnableFullDuplex()
		aw.body = &duplexBody{ReadCloser: r.Body, left: r.ContentLength, w: w, r: r}
		r.Body = aw.body // as http.MaxBytesReader is used
	}
	if aw.id == "" && aw.body == nil {
		return w, nil
	}
	return &aw, aw.body
}

func (w *answerWriter) WriteHeader(code int) {
	if code == http.StatusContinue && w.body != nil && w.body.started.Load() {
		// The body is being read, so net/http has told the client to
		// continue (the transport stopped waiting for the app's word):
		// the app's own 100, come later, would be a second one.
		return
	}
	if code >= 200 {
		h := w.Header()
		if w.id != "" && !slices.Contains(h[httpserver.HeaderRequestID], w.id) {
			h[httpserver.HeaderRequestID] = append([]string{w.id}, h[httpserver.HeaderRequestID]...)
		}
		if w.body != nil && !w.body.ended.Load() {
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

// duplexBody is an HTTP/1.1 request's body, forwarded in full duplex,
// that tells whether it has been read to its end: by its length, or its
// last chunk. The transport reads the end before it passes it on, so an
// app that answers after the whole body answers a body that has ended.
type duplexBody struct {
	io.ReadCloser
	left     int64       // bytes still to come when the length is known, else -1
	started  atomic.Bool // a read began (and net/http sent any 100 Continue)
	ended    atomic.Bool
	cut      atomic.Bool                 // end ended it first
	answered atomic.Bool                 // the app's answer has begun to arrive
	appBroke atomic.Bool                 // a read of the app's answer failed, the client still there
	conn     atomic.Pointer[watchedConn] // the connection to the app it goes on, when watched
	failed   atomic.Bool                 // a read failed on the client's side: its body was malformed or cut short
	w        http.ResponseWriter
	r        *http.Request
}

// end, before the body's end (the app answered early, or failed), ends it
// (httpserver.EndBody): the transport's goroutine may be waiting in a read
// for the client's next bytes, and the answer, already whole, would wait
// with it, HTTP/2's transport's until they came or the idle timeout ran
// out. It must run while the handler does, and only once the app's answer
// has been copied: net/http cancels the request when a read fails, which
// would cut an answer still being read from the app.
func (b *duplexBody) end() {
	if !b.ended.Load() && b.cut.CompareAndSwap(false, true) {
		httpserver.EndBody(b.w, b.r)
	}
}

// traced returns r with the hooks that tell b when the app's answer
// begins and which connection to the app carries the body.
func (b *duplexBody) traced(r *http.Request) *http.Request {
	return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*watchedConn); ok {
				b.conn.Store(c)
				c.body.Store(b)
			}
		},
		GotFirstResponseByte: func() { b.answered.Store(true) },
	}))
}

// appFailed ends the body when the app failed before its answer began:
// the transport waits for the goroutine copying the body, which would
// wait on the client until the idle timeout, which then blamed the client
// for the app's failure.
func (b *duplexBody) appFailed() {
	// A request already cancelled is the client's doing (it left, or
	// its body timed out): the transport closes the app's connection for
	// that, and it is not the app's failure.
	if !b.answered.Load() && b.r.Context().Err() == nil {
		b.end()
	}
}

// bodyCut reports whether the body of the request answered through w was
// ended by the proxy, whose ending cancels the request: the client is not
// gone for that.
func bodyCut(w http.ResponseWriter) bool {
	aw, ok := w.(*answerWriter)
	return ok && aw.body != nil && aw.body.cut.Load()
}

// watchedConn is a connection to an HTTP/1.1 app that, closed by the
// transport while an upload goes on it (the app closed or broke it), ends
// that upload (appFailed).
type watchedConn struct {
	net.Conn
	body atomic.Pointer[duplexBody]
}

func (c *watchedConn) Close() error {
	if b := c.body.Swap(nil); b != nil {
		b.appFailed()
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

// duplexOut is the body ReverseProxy sends of a request whose body is a
// duplexBody. It lets ModifyResponse find the client's body, and the
// transport's Close ends it only when the app failed before answering
// (ReverseProxy's own wrapper, which this one holds, ignores Close).
type duplexOut struct {
	io.ReadCloser
	in *duplexBody
}

// Close, by the transport before the app's answer began (HTTP/2's, when
// the app reset the stream or the connection failed), ends the body.
func (b *duplexOut) Close() error {
	b.in.appFailed()
	return b.ReadCloser.Close()
}

// endsClientBody is the app's answer to a request with a duplexBody,
// whose Close, by ReverseProxy once it has copied the answer, ends the
// client's body before the transport's Close waits for the goroutine
// reading it.
type endsClientBody struct {
	io.ReadCloser
	in *duplexBody
}

func (b *endsClientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.in.r.Context().Err() == nil {
		// Noted before Close ends the client's body, whose cancellation
		// of the request would read as the client leaving.
		b.in.appBroke.Store(true)
	}
	return n, err
}

func (b *endsClientBody) Close() error {
	b.in.end()
	return b.ReadCloser.Close()
}

// finish, once ReverseProxy has returned, ends the body and closes it,
// reading its end if that has come: net/http's server, in full duplex,
// takes a body it reads to its end after the handler for the next
// request's, reads on and panics (golang/go#68560).
func (b *duplexBody) finish() {
	b.end()
	b.ReadCloser.Close()
	if c := b.conn.Load(); c != nil {
		c.body.CompareAndSwap(b, nil)
	}
}

func (b *duplexBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// The whole length is in: the transport's last read, to find
		// the end, must not reach a body the handler may have closed.
		return 0, io.EOF
	}
	b.started.Store(true)
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF || b.left == 0:
		b.ended.Store(true)
	case err != nil && !b.cut.Load() && !errors.Is(err, httpserver.ErrBodyTimeout):
		b.failed.Store(true)
	}
	return n, err
}

// duplexOf is the HTTP/1.1 body of r, answered through w, or nil: r's
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

// bodyFailed reports whether the HTTP/1.1 body of r, answered through w,
// failed on the client's side (malformed framing, or cut short): a
// transport error that follows is the client's doing, not the app's.
func bodyFailed(w http.ResponseWriter, r *http.Request) bool {
	b := duplexOf(w, r)
	return b != nil && b.failed.Load()
}

// appBroke reports whether the app broke off its answer to r while the
// client was there, whatever cancelled the request after.
func appBroke(w http.ResponseWriter, r *http.Request) bool {
	b := duplexOf(w, r)
	return b != nil && b.appBroke.Load()
}
