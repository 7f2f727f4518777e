package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// answerOnce ends each FullDuplexCall after its first message, with
// NOT_FOUND, whether or not the client has closed its side.
type answerOnce struct{ grpctest.Echo }

func (*answerOnce) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	in, err := stream.Recv()
	if err != nil {
		return err
	}
	if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
		return err
	}
	return status.Error(codes.NotFound, "no more")
}

// streamApp serves svc over h2c until the test ends and returns the
// address of a verifier in front of it (30 s body idle timeout) and a stop
// that ends the app at once, as a crash does.
func streamApp(t *testing.T, ks *verifytest.KeySet, svc testpb.TestServiceServer) (addr string, stop func()) {
	t.Helper()
	up, srv := serveGRPC(t, func(s *grpc.Server) { testpb.RegisterTestServiceServer(s, svc) })
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	return serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 30 * time.Second, BodyMinRate: 1024}), srv.Stop
}

// openCall starts a FullDuplexCall through the verifier at addr, sends one
// message and reads its answer, and leaves the client's side open and
// quiet. The call's deadline, 10 s, is the test's hang guard, well inside
// the 30 s body idle timeout that would otherwise end it.
func openCall(t *testing.T, addr, token string) testpb.TestService_FullDuplexCallClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(withToken(callCtx(t), token))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	return stream
}

// TestGRPCCallEndsWithTheApp: a call whose client keeps its side open,
// quiet, ends when the app ends it, as on a direct connection: with the
// app's status when it returns, with UNAVAILABLE when it crashes. The
// verifier used to hold the end back until the client spoke or the call's
// deadline passed: the HTTP/2 transport waits for the request body it is
// sending, and after the first message nothing bounds that body.
func TestGRPCCallEndsWithTheApp(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	tok := ks.Token(t, "user-1")

	t.Run("the app returns", func(t *testing.T) {
		addr, _ := streamApp(t, ks, &answerOnce{})
		_, err := openCall(t, addr, tok).Recv()
		if status.Code(err) != codes.NotFound || status.Convert(err).Message() != "no more" {
			t.Fatalf("Recv after the app returned = %v, want its NotFound", err)
		}
	})

	t.Run("the app crashes", func(t *testing.T) {
		addr, stop := streamApp(t, ks, &grpctest.Echo{})
		stream := openCall(t, addr, tok)
		stop()
		_, err := stream.Recv()
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "broke off") {
			t.Fatalf("Recv after the app crashed = %v, want the verifier's Unavailable, which a client may retry", err)
		}
	})

	t.Run("a stalled first message after the app's headers", func(t *testing.T) {
		// Echo sends its headers before reading a message: the verifier
		// can no longer answer trailers-only, and ends the call in
		// trailers instead of resetting the stream.
		_, up := echoApp(t)
		p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
		addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 200 * time.Millisecond})
		resp, _ := grpctest.StalledCall(t, addr, testpb.TestService_FullDuplexCall_FullMethodName, tok, []byte{0, 0, 0})
		if resp.Header.Get("X-Seen-User-Id") == "" || resp.Trailer.Get("Grpc-Status") != "4" {
			t.Fatalf("stalled stream = %d, headers %v, trailers %v; want the app's headers, then grpc-status 4", resp.StatusCode, resp.Header, resp.Trailer)
		}
	})
}

// TestH2CEarlyAnswerWhileTheBodyIsOpen: an app that answers an HTTP/2
// upload before reading it (413, say) is answered at once, though the
// client is still sending, not once the body idle timeout has run out.
func TestH2CEarlyAnswerWhileTheBodyIsOpen(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	up := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 30 * time.Second, BodyMinRate: 1024})
	body, open := io.Pipe()
	defer open.Close()
	go open.Write([]byte("the start of a large upload"))
	req, _ := http.NewRequestWithContext(callCtx(t), http.MethodPost, "http://"+addr+"/upload", body)
	req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
	resp, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatalf("upload with the body open: %v; want the app's answer within 10 s", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || !strings.Contains(string(got), "too large") {
		t.Fatalf("upload with the body open = %d %q, %v; want the app's 413", resp.StatusCode, got, err)
	}
}

// TestGRPCWebBreakIsReset: a gRPC-Web client reads its status from the
// body, never from HTTP trailers, so a gRPC-Web answer the app breaks off
// is reset, as a plain HTTP one is, and not ended cleanly with trailers it
// would take for a complete answer.
func TestGRPCWebBreakIsReset(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	up := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc-web+proto")
		w.Write([]byte{0, 0, 0, 0, 10, 1, 2}) // a message cut short
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamH2C})
	addr := serveProxy(t, p, httpserver.Options{})
	req, _ := http.NewRequestWithContext(callCtx(t), http.MethodPost, "http://"+addr+"/svc/Method", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
	resp, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("a gRPC-Web answer the app broke off read to a clean end, trailers %v; want the stream reset", resp.Trailer)
	}
}
