package proxy_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// TestGRPCUpstreamDown: an app that cannot be reached is UNAVAILABLE to a
// gRPC client, with the verifier's message.
func TestGRPCUpstreamDown(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	ln.Close()
	client := grpcClient(t, h2cVerifier(t, ks.Verifier(t), down, proxy.UpstreamH2C))
	_, err = client.Check(withToken(callCtx(t), ks.Token(t, "user-1")), &healthpb.HealthCheckRequest{})
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("Check with the app down = %v, want Unavailable", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "did not answer") {
		t.Errorf("Check with the app down: message = %q, want the verifier's", msg)
	}
}

// TestGRPCStalledRequestIsDeadlineExceeded: a gRPC call whose request
// message stalls past the body idle timeout is the client's fault, not the
// app's: DEADLINE_EXCEEDED with the verifier's message, as a
// trailers-only answer, instead of the UNAVAILABLE of an app down.
func TestGRPCStalledRequestIsDeadlineExceeded(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	app, up := grpcApp(t)
	log := slog.New(slog.DiscardHandler)
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: log, UpstreamProtocol: proxy.UpstreamH2C})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		name string
		sent []byte // then nothing
	}{
		// The body deadlines hold until the first message is whole: a
		// unary call's request is that message.
		{"inside the length prefix", []byte{0, 0, 0}},
		{"inside the first message", []byte{0, 0, 0, 0, 10, 1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, n := grpctest.StalledCall(t, addr, "/grpc.health.v1.Health/Check", ks.Token(t, "user-1"), tc.sent)
			if resp.StatusCode != http.StatusOK || n != 0 || resp.Header.Get("Grpc-Status") != "4" || !strings.Contains(resp.Header.Get("Grpc-Message"), "did not arrive in time") {
				t.Errorf("stalled gRPC call = %d, %d body bytes, grpc-status %q, grpc-message %q; want 200, none, 4 and the verifier's message",
					resp.StatusCode, n, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"))
			}
			if got := app.Calls(); got != 0 {
				t.Errorf("calls the app completed = %d, want 0", got)
			}
		})
	}
}

// TestGRPCBodyToHTTP1UpstreamStaysBounded: only an h2c upstream can carry
// a gRPC stream, so only there does a call's first message end the body
// deadlines. In front of an HTTP/1.1 app, a body that calls itself gRPC is
// an upload like any other: stalling after a complete first message still
// ends it, with DEADLINE_EXCEEDED, instead of holding the app's
// connection for as long as the client likes.
func TestGRPCBodyToHTTP1UpstreamStaysBounded(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	app := newUpstream(t)
	app.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Grpc-Status", "0")
	})
	u, _ := url.Parse(app.srv.URL)
	p := proxy.NewProxy(ks.Verifier(t), u, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: proxy.UpstreamHTTP1})
	addr := serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 200 * time.Millisecond, BodyMinRate: 1024})
	// A whole, empty first message, then nothing.
	resp, _ := grpctest.StalledCall(t, addr, "/grpc.health.v1.Health/Check", ks.Token(t, "user-1"), []byte{0, 0, 0, 0, 0})
	if got := resp.Header.Get("Grpc-Status"); resp.StatusCode != http.StatusOK || got != "4" {
		t.Errorf("a stalled body to an HTTP/1.1 app = %d with grpc-status %q, want 200 and 4 DEADLINE_EXCEEDED", resp.StatusCode, got)
	}
}
