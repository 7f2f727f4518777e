package issuerapi

import (
	"context"
	"errors"
	"testing"
)

// stuckPinger is a database driver that ignores the context, as lib/pq does
// while it connects to a host that drops packets.
type stuckPinger struct{ release chan struct{} }

func (p stuckPinger) Ping(context.Context) error {
	<-p.release
	return errors.New("connect: timed out")
}

func TestPingWithinHonoursTheDeadline(t *testing.T) {
	p := stuckPinger{release: make(chan struct{})}
	defer close(p.release)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the health check's 1 s has run out
	if err := pingWithin(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("pingWithin(stuck driver) = %v, want the context's error at once", err)
	}
}
