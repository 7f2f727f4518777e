package sqlstore

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPGDialerUserTimeout: connections to PostgreSQL give up on a host
// that stops acknowledging after tcpUserTimeout, not the kernel's
// retransmission timeout.
func TestPGDialerUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := newPGDialer().DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil || gerr != nil {
		t.Fatalf("getsockopt(TCP_USER_TIMEOUT): %v %v", err, gerr)
	}
	if want := int(tcpUserTimeout.Milliseconds()); got != want {
		t.Errorf("TCP_USER_TIMEOUT of a dialled connection = %d ms, want %d ms", got, want)
	}
}
