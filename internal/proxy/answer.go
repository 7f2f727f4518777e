package proxy

import (
	"io"
	"net/http"
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
	left   int64 // bytes still to come when the length is known, else -1
	ended  atomic.Bool
	closed atomic.Bool
	w      http.ResponseWriter
	r      *http.Request
}

// Close, before the body's end (the app answered early, or failed), ends
// the body first: the transport's goroutine may be waiting in a read for
// the client's next bytes, and the answer, already whole, would wait with
// it until they came or the idle timeout ran out. It runs while the
// handler does: from the HTTP/2 transport when the app ends the exchange,
// and from ServeHTTP once ReverseProxy has returned.
func (b *duplexBody) Close() error {
	if !b.ended.Load() && b.closed.CompareAndSwap(false, true) {
		httpserver.EndBody(b.w, b.r)
	}
	return b.ReadCloser.Close()
}

func (b *duplexBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if err == io.EOF || b.left == 0 {
		b.ended.Store(true)
	}
	return n, err
}
