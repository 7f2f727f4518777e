//go:build !linux

package sqlstore

import (
	"syscall"
	"time"
)

// userTimeoutControl does nothing where TCP_USER_TIMEOUT does not exist:
// there, a host that drops packets holds a statement in flight for the
// system's TCP retransmission timeout.
func userTimeoutControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
