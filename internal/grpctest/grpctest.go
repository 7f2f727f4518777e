// Package grpctest is for tests only: real gRPC services whose calls a
// test can count and inspect (Health; Echo, with client-streaming and
// bidirectional calls) and the checks the tests run through the verifier
// with them. It is the one place outside test files that
// imports grpc-go, and only tests import it, so neither binary links it
// (TestBinariesDoNotLinkGRPC).
package grpctest

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/metadata"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Health is gRPC's health service (unary Check, server-streaming Watch)
// that counts the calls reaching it, keeps the metadata of the last, and
// answers every call with the trailer x-app-trailer: seen, so a test sees
// whether trailers cross a proxy. It is safe for concurrent use.
type Health struct {
	*health.Server
	calls atomic.Int64
	mu    sync.Mutex
	last  metadata.MD
}

// NewHealth returns a Health reporting SERVING for the empty service name.
func NewHealth() *Health { return &Health{Server: health.NewServer()} }

// Calls returns how many calls have reached the service.
func (h *Health) Calls() int64 { return h.calls.Load() }

// LastMetadata returns the incoming metadata of the latest call.
func (h *Health) LastMetadata() metadata.MD {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *Health) record(ctx context.Context) {
	h.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	h.mu.Lock()
	h.last = md.Copy()
	h.mu.Unlock()
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-app-trailer", "seen"))
}

// Check records the call and answers as the health server does.
func (h *Health) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.record(ctx)
	return h.Server.Check(ctx, in)
}

// Watch records the call and streams as the health server does.
func (h *Health) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.record(stream.Context())
	return h.Server.Watch(in, stream)
}
