//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// quiet reports whether nothing has arrived on c, not even the end of the
// stream: a peek that does not wait, one system call. net.Conn has no
// such read (a Read with a past deadline returns before asking the
// kernel), so it goes to the socket itself.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	var perr error
	err = raw.Read(func(fd uintptr) bool {
		_, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait for data
	})
	return err == nil && (perr == syscall.EAGAIN || perr == syscall.EWOULDBLOCK)
}
