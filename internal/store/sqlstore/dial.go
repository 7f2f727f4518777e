package sqlstore

import (
	"context"
	"net"
	"time"
)

// tcpUserTimeout bounds how long data sent on an established PostgreSQL
// connection may go unacknowledged by the server's host before the
// connection is dropped (TCP_USER_TIMEOUT, on Linux). Without it a host
// that starts dropping packets holds a statement in flight, and the pooled
// connection it runs on, for the kernel's retransmission timeout (about 15
// minutes), and lib/pq does not give up on a statement when its context
// ends. A server that is merely slow still acknowledges at once, so this
// never cuts a long statement short. Ten seconds rides out a brief network
// hiccup.
const tcpUserTimeout = 10 * time.Second

// pgDialer is the dialer lib/pq opens PostgreSQL connections with: the
// standard one (TCP keep-alives on) plus tcpUserTimeout.
type pgDialer struct{ d net.Dialer }

func newPGDialer() pgDialer {
	return pgDialer{d: net.Dialer{Control: userTimeoutControl(tcpUserTimeout)}}
}

func (p pgDialer) Dial(network, address string) (net.Conn, error) {
	return p.d.Dial(network, address)
}

func (p pgDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	d := p.d
	d.Timeout = timeout
	return d.Dial(network, address)
}

func (p pgDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return p.d.DialContext(ctx, network, address)
}
