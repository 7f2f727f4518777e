//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// peeker reports whether nothing has arrived on a connection, not even
// the end of the stream: a peek that does not wait, one system call.
// net.Conn has no such read (a Read with a past deadline returns before
// asking the kernel), so it goes to the socket itself. It is made once per
// connection, so that a look, made before every reuse, allocates nothing.
// A peeker serves one goroutine at a time, as its connection does.
type peeker struct {
	raw    syscall.RawConn // nil: not a socket, or one we could not reach
	broken bool            // the socket could not be reached: never quiet
	buf    [1]byte
	err    error                 // the last peek's
	peek   func(fd uintptr) bool // peekFD, bound once
}

func newPeeker(c net.Conn) *peeker {
	p := new(peeker)
	p.peek = p.peekFD
	if sc, ok := c.(syscall.Conn); ok {
		raw, err := sc.SyscallConn()
		p.raw, p.broken = raw, err != nil
	}
	return p
}

func (p *peeker) peekFD(fd uintptr) bool {
	_, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // never wait for data
}

func (p *peeker) quiet() bool {
	if p.raw == nil {
		return !p.broken
	}
	err := p.raw.Read(p.peek)
	return err == nil && (p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK)
}
