package e2e

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/testnet"
)

// TestVerifierGRPCUpstreamPing: with --upstream-ping-interval, through the
// real binary, a quiet stream to a grpc-go app that permits the pings as
// the README says lives through several of them; once the connection to
// the app goes silent (its host gone: no FIN, no RST), the stream ends
// when a ping goes unanswered instead of hanging until TCP keepalive gives
// up minutes later.
func TestVerifierGRPCUpstreamPing(t *testing.T) {
	app := grpctest.NewHealth()
	freezer := testnet.NewFreezer()
	var pings pingCounter
	ks, v, conn := grpcVerifierWith(t, grpcApp{
		register: func(s *grpc.Server) { healthpb.RegisterHealthServer(s, app) },
		// The README's advice for an app behind the verifier: pings
		// permitted at half the interval, and on a connection with no
		// call.
		options: []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: 500 * time.Millisecond, PermitWithoutStream: true,
		})},
		relay: func(addr string) string { return testnet.Relay(t, addr, pings.wrap(freezer.Pass), freezer.Pass) },
	}, "--upstream-ping-interval", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+ks.Token(t, "user-1"))
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch answer = %v, %v; want SERVING", resp.GetStatus(), err)
	}
	// grpc-go ends a connection on the third ping that breaks its
	// policy; four pings cross a policy that holds.
	waitFor(t, "four pings to the app", func() bool { return pings.n.Load() >= 4 })
	app.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if resp, err := stream.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch answer after %d pings = %v, %v; want NOT_SERVING on the same stream\n%s", pings.n.Load(), resp.GetStatus(), err, v.logs.String())
	}

	freezer.Freeze()
	_, err = stream.Recv()
	if ctx.Err() != nil {
		t.Fatalf("the stream over a silent connection to the app did not end within 30 s (it should in about 2 s): %v", err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after the app went silent = %v, want UNAVAILABLE", err)
	}
}

// pingCounter counts the HTTP/2 PING frames (acks aside) a relay carries.
type pingCounter struct{ n atomic.Int64 }

// wrap returns next, counting the pings in what it relays.
func (c *pingCounter) wrap(next testnet.Pass) testnet.Pass {
	return func(dst io.Writer, src io.Reader) {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.scan(pr)
			io.Copy(io.Discard, pr)
		}()
		next(dst, io.TeeReader(src, pw))
		pw.Close()
		<-done
	}
}

// scan reads a client's HTTP/2 stream: the preface, then frames.
func (c *pingCounter) scan(r io.Reader) {
	if _, err := io.ReadFull(r, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			c.n.Add(1)
		}
	}
}
