package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"net"
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
}

func (l fieldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &fieldConn{Conn: c, max: l.max}
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
	max   int
	state atomic.Int32

	// Used by the reads of the connection, one at a time, and by
	// nextRequest once none is under way.
	lines   int  // lines of the header so far, the request line included
	partial int  // bytes of the current line so far
	cr      bool // the current line so far is a lone '\r'
}

const (
	fieldsCounting int32 = iota
	fieldsDone           // the header ended; its request is being answered
	fieldsOff
)

func (c *fieldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state.Load() == fieldsCounting && c.scan(p[:n]) {
		_, _ = c.Conn.Write([]byte(tooManyFieldsAnswer(c.max)))
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
		if i < 0 {
			c.cr = c.partial == 0 && len(b) == 1 && b[0] == '\r' || c.cr && len(b) == 0
			c.partial += len(b)
			return false
		}
		blank := c.partial+i == 0 || c.partial+i == 1 && (c.cr || i == 1 && b[0] == '\r')
		c.partial, c.cr, b = 0, false, b[i+1:]
		if blank && c.lines > 0 {
			c.lines = 0
			c.state.CompareAndSwap(fieldsCounting, fieldsDone)
			return false
		}
		if !blank {
			c.lines++
		}
		if c.lines > c.max+1 {
			return true
		}
	}
}

// tooManyFieldsAnswer is the 431 a request with more than max header
// fields gets, as problem+json.
func tooManyFieldsAnswer(max int) string {
	body := fmt.Sprintf(`{"type":"about:blank","title":"Request Header Fields Too Large","status":431,"code":"too_many_header_fields","detail":"A request may have at most %d header fields."}`, max) + "\n"
	return fmt.Sprintf("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// nextRequest counts the header lines of c's next request from zero, when
// c is a fieldConn still counting: called as the connection goes idle
// between requests (http.StateIdle), once its answer is done and nothing
// reads it, whether a handler or net/http itself answered.
func nextRequest(c net.Conn) {
	if fc, ok := c.(*fieldConn); ok && fc.state.CompareAndSwap(fieldsDone, fieldsCounting) {
		fc.lines, fc.partial, fc.cr = 0, 0, false
	}
}

// stopCounting turns c's counting off for good, when c is a fieldConn:
// the frames of an HTTP/2 connection, or the bytes of a hijacked one, are
// no header lines.
func stopCounting(c net.Conn) {
	if fc, ok := c.(*fieldConn); ok {
		fc.state.Store(fieldsOff)
	}
}
