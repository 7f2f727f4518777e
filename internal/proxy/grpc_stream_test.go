package proxy_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// echoApp is grpctest.Echo served on loopback over h2c, as gRPC servers
// without TLS speak.
func echoApp(t testing.TB) (*grpctest.Echo, *url.URL) {
	t.Helper()
	echo := &grpctest.Echo{}
	u, _ := serveGRPC(t, func(s *grpc.Server) { testpb.RegisterTestServiceServer(s, echo) })
	return echo, u
}

// TestGRPCQuietStreams: the body deadlines bound a gRPC call until its
// first message has arrived; after it, a client-streaming or bidirectional
// call's client may stay quiet for longer than --read-idle-timeout, below
// --read-min-rate, and the stream goes on, as it would on a direct
// connection to the app.
func TestGRPCQuietStreams(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	echo, up := echoApp(t)
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 300 * time.Millisecond, BodyMinRate: 1024})
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := testpb.NewTestServiceClient(conn)
	tok := ks.Token(t, "user-1")
	quiet := func() { grpctest.OutwaitBodyTimeout(t, addr, tok) }

	t.Run("bidirectional", func(t *testing.T) {
		stream, err := client.FullDuplexCall(withToken(callCtx(t), tok, "x-auth-user-id", "admin"))
		if err != nil {
			t.Fatal(err)
		}
		grpctest.EchoQuietly(t, stream, quiet)
	})

	t.Run("client streaming", func(t *testing.T) {
		stream, err := client.StreamingInputCall(withToken(callCtx(t), tok))
		if err != nil {
			t.Fatal(err)
		}
		for i, body := range []string{"first", "second", "third"} {
			if i > 0 {
				quiet()
			}
			if err := stream.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: []byte(body)}}); err != nil {
				_, err = stream.CloseAndRecv() // the call's status
				t.Fatalf("Send %d after a quiet spell: the call ended with %v, want it open", i, err)
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil || resp.GetAggregatedPayloadSize() != int32(len("firstsecondthird")) {
			t.Fatalf("CloseAndRecv = %d, %v; want %d", resp.GetAggregatedPayloadSize(), err, len("firstsecondthird"))
		}
	})

	t.Run("cancelled by the client", func(t *testing.T) {
		// The client going away mid-stream must end the app's call too,
		// not leave it waiting on a stream nobody will write again.
		ctx, cancel := context.WithCancel(withToken(context.Background(), tok))
		defer cancel()
		stream, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("hi")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		if got := echo.Active(); got != 1 {
			t.Fatalf("calls in progress at the app = %d, want 1", got)
		}
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for echo.Active() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("calls in progress at the app 10 s after the client cancelled = %d, want 0", echo.Active())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestGRPCStreamsDrainOnShutdown: when the verifier shuts down (SIGTERM),
// a stream in progress goes on through the shutdown grace, the client is
// told (GOAWAY) to start new calls elsewhere, and once the grace is over
// the stream ends with UNAVAILABLE, which gRPC clients retry, instead of
// hanging.
func TestGRPCStreamsDrainOnShutdown(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	_, up := echoApp(t)
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	addr, shutdown := startProxy(t, p, httpserver.Options{ShutdownTimeout: time.Second})
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(withToken(callCtx(t), ks.Token(t, "user-1")))
	if err != nil {
		t.Fatal(err)
	}
	echo := func() error {
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("hi")}}); err != nil {
			_, err = stream.Recv() // the call's status
			return err
		}
		_, err := stream.Recv()
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}

	served := make(chan error, 1)
	go func() { served <- shutdown() }()
	// The client leaves the ready state when the GOAWAY arrives.
	ctx := callCtx(t)
	if !conn.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatal("the client's connection stayed ready 10 s into the shutdown, want a GOAWAY")
	}
	if err := echo(); err != nil {
		t.Fatalf("the stream during the shutdown grace: %v, want it open", err)
	}
	if err := <-served; err == nil {
		t.Error("Serve returned nil, want the error of a shutdown that outlasted its grace")
	}
	if err := echo(); status.Code(err) != codes.Unavailable {
		t.Errorf("the stream after the shutdown grace: %v, want Unavailable", err)
	}
}

// TestGRPCPublicStreamStaysBounded: a call on a public path needs no
// token, so nothing vouches for its client: its body stays bounded after
// the first message, and a quiet stream is cut off as an upload would be.
func TestGRPCPublicStreamStaysBounded(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	_, up := echoApp(t)
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{
		Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C,
		Public: proxy.NewPublicPaths([]string{"/grpc.testing.TestService/*"}),
	})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 300 * time.Millisecond, BodyMinRate: 1024})
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("the public call's first echo: %v", err)
	}
	grpctest.OutwaitBodyTimeout(t, addr, "")
	err = stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("second")}})
	if err == nil {
		_, err = stream.Recv()
	}
	if err == nil {
		t.Fatal("a public stream quiet past the idle timeout is still open, want it cut off")
	}
}
