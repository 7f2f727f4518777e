package httpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// DefaultMaxHeaderFields is the most header fields an HTTP/1 request may
// have, Apache's and Tomcat's default. net/http bounds a request's header
// in bytes alone, and holds each field in about 110 bytes of map and
// strings: 9,000 empty fields fit in 64 KiB and cost a MiB, so 500
// connections sending them held the issuer at 545 MiB with no request
// ever reaching a handler. (HTTP/2 counts 32 bytes of overhead a field
// against the byte limit, which bounds fields there.)
const DefaultMaxHeaderFields = 100

// errTooManyFields ends the read of a request whose header has too many
// fields. Wrapped as a read *net.OpError, it makes net/http close the
// connection without an answer of its own: fieldConn has written the 431.
var errTooManyFields = errors.New("httpserver: too many header fields")

// fieldListener counts the header lines of each HTTP/1 request its
// connections carry (see fieldConn).
type fieldListener struct {
	net.Listener
	max int
	// refused, when not nil, is told of each request answered 431 on c
	// (with the answer's size in bytes), for its access line.
	refused func(c net.Conn, bytes int)
}

func (l fieldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &fieldConn{Conn: c, max: l.max, refused: l.refused}
	fc.state.Store(fieldsCounting)
	return fc, nil
}

// fieldConn counts the lines of a request's header as they are read, from
// the first byte of the connection, or from when it went idle after the
// previous request, to the blank line that ends the header; past max
// fields it answers 431 itself and fails the read. It does not count
// between (fieldsDone): a body is not a header, and what net/http reads
// ahead of the next request meanwhile is at most its 4 KiB buffer. An
// HTTP/2 or hijacked connection stops counting for good (fieldsOff).
type fieldConn struct {
	net.Conn
	max     int
	refused func(c net.Conn, bytes int) // fieldListener's
	state   atomic.Int32

	// Used by the reads of the connection, one at a time, and by
	// nextRequest once none is under way.
	lines    int      // lines of the header so far, the request line included
	partial  int      // bytes of the current line so far
	head     [18]byte // the current line's first bytes, enough for its name
	length   bool     // the header has a Content-Length
	chunked  bool     // the header has a Transfer-Encoding
	smuggled bool     // a request had both: the connection ends after it
}

// The field names whose pairing is a request smuggling attempt, lower
// case, with the colon that ends them (net/http refuses a space before
// it).
var (
	contentLengthField    = []byte("content-length:")
	transferEncodingField = []byte("transfer-encoding:")
)

const (
	fieldsCounting int32 = iota
	fieldsDone           // the header ended; its request is being answered
	fieldsOff
)

func (c *fieldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state.Load() == fieldsCounting && c.scan(p[:n]) {
		c.state.Store(fieldsOff)
		answer := tooManyFieldsAnswer(c.max)
		if c.refused != nil {
			c.refused(c.Conn, len(answer)) // logged before the client can see the answer
		}
		_, _ = c.Conn.Write([]byte(answer))
		return 0, &net.OpError{Op: "read", Net: "tcp", Addr: c.RemoteAddr(), Err: errTooManyFields}
	}
	return n, err
}

// scan counts the header lines in b and reports whether they are more than
// the request line and max fields. At the blank line that ends the
// header it stops counting.
func (c *fieldConn) scan(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line = b[:i]
		}
		if c.partial < len(c.head) {
			copy(c.head[c.partial:], line)
		}
		if i < 0 {
			c.partial += len(b)
			return false
		}
		n := c.partial + i // the line's length
		c.partial, b = 0, b[i+1:]
		if n == 0 || n == 1 && c.head[0] == '\r' { // blank
			if c.lines == 0 {
				continue
			}
			c.lines = 0
			c.smuggled = c.smuggled || c.length && c.chunked
			c.length, c.chunked = false, false
			c.state.CompareAndSwap(fieldsCounting, fieldsDone)
			return false
		}
		if c.head[0] == ' ' || c.head[0] == '\t' {
			continue // an obsolete continuation of the field above
		}
		c.note(c.head[:min(n, len(c.head))])
		if c.lines++; c.lines > c.max+1 {
			return true
		}
	}
}

// note records whether the header line that starts with head names the
// body's length or its transfer coding. RFC 9112 (6.3): a server that
// receives both in a request MUST close the connection after answering
// it; net/http reads the body as chunked and keeps the connection, so
// that what a front proxy took for the next request is served as one.
func (c *fieldConn) note(head []byte) {
	switch {
	case len(head) >= len(contentLengthField) && bytes.EqualFold(head[:len(contentLengthField)], contentLengthField):
		c.length = true
	case len(head) >= len(transferEncodingField) && bytes.EqualFold(head[:len(transferEncodingField)], transferEncodingField):
		c.chunked = true
	}
}

// tooManyFieldsAnswer is the 431 a request with more than max header
// fields gets, as problem+json.
func tooManyFieldsAnswer(max int) string {
	body := tooManyFieldsBody(max)
	return fmt.Sprintf("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

func tooManyFieldsBody(max int) string {
	return fmt.Sprintf(`{"type":"about:blank","title":"Request Header Fields Too Large","status":431,"code":"too_many_header_fields","detail":"A request may have at most %d header fields."}`, max) + "\n"
}

// nextRequest counts the header lines of c's next request from zero, when
// c is a fieldConn still counting, or closes c after a request with both
// Content-Length and Transfer-Encoding: called as the connection goes
// idle between requests (http.StateIdle), once its answer is done and
// nothing reads it, whether a handler or net/http itself answered.
func nextRequest(c net.Conn) {
	fc, ok := c.(*fieldConn)
	if !ok || !fc.state.CompareAndSwap(fieldsDone, fieldsCounting) {
		return
	}
	if fc.smuggled {
		_ = fc.Conn.Close()
		return
	}
	fc.lines, fc.partial = 0, 0
}

// stopCounting turns c's counting off for good, when c is a fieldConn:
// the frames of an HTTP/2 connection, or the bytes of a hijacked one, are
// no header lines.
func stopCounting(c net.Conn) {
	if fc, ok := c.(*fieldConn); ok {
		fc.state.Store(fieldsOff)
	}
}

type fieldConnKey struct{}

// withFieldConn puts c in its connection's context
// (http.Server.ConnContext), where checkHeader finds it.
func withFieldConn(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*fieldConn); ok {
		return context.WithValue(ctx, fieldConnKey{}, fc)
	}
	return ctx
}

// checkHeader is the check of a request's header at its handler's start,
// on either protocol. An HTTP/1 connection stops counting lines there: a
// request read from what net/http had buffered (pipelined behind the one
// before) began before nextRequest restarted the count, so the count
// could have run on into its body. A request with both Content-Length and
// Transfer-Encoding is answered with Connection: close, so that net/http
// serves nothing more on its connection (what it read ahead past the body,
// already in its buffer, would be served even once nextRequest had closed
// the connection). And a request with more than max fields is answered
// 431: the line count misses what net/http had buffered past a header (up
// to 4 KiB, about 1,100 fields), and HTTP/2 bounds fields only by the
// bytes of the header, 32 bytes of overhead each (1,850 fit in 64 KiB,
// and 100 streams held open with them took 37 MB a connection).
func checkHeader(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An HTTP/1 handler runs on the goroutine that read its header.
		if fc, ok := r.Context().Value(fieldConnKey{}).(*fieldConn); ok && r.ProtoMajor == 1 {
			fc.state.CompareAndSwap(fieldsCounting, fieldsDone)
			if fc.smuggled {
				w.Header().Set("Connection", "close")
			}
		}
		if fieldCount(r.Header) > max {
			h := w.Header()
			if r.ProtoMajor == 1 {
				h.Set("Connection", "close")
			}
			h.Set("Content-Type", "application/problem+json")
			h.Set("Cache-Control", "no-store")
			h.Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			_, _ = io.WriteString(w, tooManyFieldsBody(max))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fieldCount is the number of fields in h, each value of a repeated name
// one, Host aside (net/http takes it out of the map).
func fieldCount(h http.Header) int {
	n := 1
	for _, vv := range h {
		n += len(vv)
	}
	return n
}
