package proxy_test

import (
	"log/slog"
	"net"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// quietIdle is the body idle timeout of TestGRPCQuietStreams; its client
// stays quiet for quietPause, well past it, and more than the first idle
// window that --read-min-rate grants.
const (
	quietIdle  = 300 * time.Millisecond
	quietPause = 3 * quietIdle
)

// TestGRPCQuietStreams: the body deadlines bound a gRPC call until its
// first message has arrived; after it, a client-streaming or bidirectional
// call's client may stay quiet for longer than --read-idle-timeout, below
// --read-min-rate, and the stream goes on, as it would on a direct
// connection to the app.
func TestGRPCQuietStreams(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := grpc.NewServer()
	testpb.RegisterTestServiceServer(app, grpctest.Echo{})
	go app.Serve(ln)
	t.Cleanup(app.Stop)
	up := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	p := proxy.NewProxy(ks.Verifier(t), up, proxy.NewH2CTransport(), proxy.Config{Logger: slog.New(slog.DiscardHandler)})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: quietIdle, BodyMinRate: 1024})
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := testpb.NewTestServiceClient(conn)
	tok := ks.Token(t, "user-1")

	t.Run("bidirectional", func(t *testing.T) {
		stream, err := client.FullDuplexCall(withToken(callCtx(t), tok, "x-auth-user-id", "admin"))
		if err != nil {
			t.Fatal(err)
		}
		grpctest.EchoQuietly(t, stream, quietPause)
	})

	t.Run("client streaming", func(t *testing.T) {
		stream, err := client.StreamingInputCall(withToken(callCtx(t), tok))
		if err != nil {
			t.Fatal(err)
		}
		for i, body := range []string{"first", "second", "third"} {
			if i > 0 {
				time.Sleep(quietPause)
			}
			if err := stream.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: []byte(body)}}); err != nil {
				_, err = stream.CloseAndRecv() // the call's status
				t.Fatalf("Send %d after a quiet %s: the call ended with %v, want it open", i, quietPause, err)
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil || resp.GetAggregatedPayloadSize() != int32(len("firstsecondthird")) {
			t.Fatalf("CloseAndRecv = %d, %v; want %d", resp.GetAggregatedPayloadSize(), err, len("firstsecondthird"))
		}
	})
}
