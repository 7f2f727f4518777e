package issuerapi

import (
	"io"
	"net/http"
	"sync/atomic"
)

// heldBodies counts the bytes of request bodies the API holds in memory.
// The issuer's soft memory limit follows them: a client that sends its
// body slowly holds the buffer for as long as the body timeout allows, and
// 250 such clients took the heap to the limit, where the collector ran
// without pause (logins at 0.65x).
type heldBodies struct{ n atomic.Int64 }

// firstBuffer bounds the buffer a body starts with: a Content-Length no
// larger (a login's is about 100 bytes) sizes it exactly; a larger one
// must send its bytes to make the buffer grow, so headers alone cannot
// make the issuer hold more than io.ReadAll's first 512 bytes. (4 KiB
// held 3 MiB more than that for 2,000 connections that sent only headers.)
const firstBuffer = 512

// read reads r to its end, or to one byte past limit, into a buffer counted
// until release is called. size is the Content-Length, or -1.
func (h *heldBodies) read(r io.Reader, size, limit int64) (buf []byte, release func(), err error) {
	n := int64(512)
	if size >= 0 {
		n = min(size, limit, firstBuffer) + 1 // the byte past the end, to see io.EOF without growing
	}
	buf = make([]byte, 0, n)
	held := int64(cap(buf))
	h.n.Add(held)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow as append does
			h.n.Add(int64(cap(buf)) - held)
			held = int64(cap(buf))
		}
		var k int
		k, err = r.Read(buf[len(buf):min(int64(cap(buf)), limit+1)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			err = nil
			break
		}
		if err != nil {
			break
		}
	}
	return buf, func() { h.n.Add(-held) }, err
}

// HeldBodyBytes returns how many bytes of request bodies the API holds in
// memory now. Safe for concurrent use.
func (a *API) HeldBodyBytes() int64 { return a.bodies.n.Load() }

// peekedBody is a request body read whole by peekEmail: the handler takes
// the bytes as they are instead of reading them again.
type peekedBody struct {
	io.ReadCloser // the original body, at its end
	body          []byte
}

// peeked returns the body peekEmail read whole, if it did.
func peeked(r *http.Request) ([]byte, bool) {
	p, ok := r.Body.(*peekedBody)
	if !ok {
		return nil, false
	}
	return p.body, true
}
