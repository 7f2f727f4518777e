package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// BenchmarkGRPCUnary measures gRPC unary calls (health Check) through the
// verifier, with an h2c upstream and the binary's middleware chain, against
// a bare HTTP/2 Go proxy (httputil.ReverseProxy with the same h2c
// transport, on an h2c server), in the same run over loopback. The two
// alternate in short rounds.
//
// Target: ratio (verifier calls/s over bare calls/s) at least 0.9.
func BenchmarkGRPCUnary(b *testing.B) {
	_, up := grpcApp(b)

	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(up); pr.SetXForwarded() },
		Transport: proxy.NewH2CTransport(0),
	}
	bareAddr := serveH2C(b, bare)

	ks := verifytest.NewKeySet(b)
	ks.TTL = time.Hour
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, CacheSize: 10000})
	if err != nil {
		b.Fatal(err)
	}
	// The chain the binary serves, access log included (JSON to
	// io.Discard, so its formatting cost is counted), with its default
	// body deadlines.
	log := httpserver.NewLogger(io.Discard, slog.LevelInfo)
	p := proxy.NewProxy(v, up, nil, proxy.Config{Logger: log, UpstreamProtocol: proxy.UpstreamH2C})
	srv := httpserver.New("proxy", log, httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, p))), httpserver.Options{
		BodyIdleTimeout: 30 * time.Second, BodyMinRate: 1024, Protocols: proxy.ServerProtocols(),
	})
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	verifierAddr := srv.Addr().String()
	tok := ks.Token(b, "user-1")

	bareClient, verifierClient := grpcClient(b, bareAddr), grpcClient(b, verifierAddr)
	const workers = 16
	var bareTime, verifierTime time.Duration
	b.ResetTimer()
	// Short rounds, so that the load of the rest of the machine, which
	// comes and goes, falls on both alike.
	const round = 200
	for left := b.N; left > 0; {
		n := min(left, round)
		left -= n
		bareTime += grpcLoad(b, bareClient, "", n, workers)
		verifierTime += grpcLoad(b, verifierClient, tok, n, workers)
	}
	bareRate := float64(b.N) / bareTime.Seconds()
	verifierRate := float64(b.N) / verifierTime.Seconds()
	b.ReportMetric(bareRate, "bare-calls/s")
	b.ReportMetric(verifierRate, "verifier-calls/s")
	b.ReportMetric(verifierRate/bareRate, "ratio")
}

// serveH2C serves h on loopback over HTTP/1.1 and h2c.
func serveH2C(b *testing.B, h http.Handler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: proxy.ServerProtocols(), ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// grpcLoad makes n unary calls from workers goroutines and returns how
// long they took.
func grpcLoad(b *testing.B, c healthpb.HealthClient, token string, n, workers int) time.Duration {
	ctx := context.Background()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
