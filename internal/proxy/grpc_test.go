package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// grpcApp is a gRPC server on loopback, speaking h2c as every gRPC server
// without TLS does.
func grpcApp(t testing.TB) (*grpctest.Health, *url.URL) {
	t.Helper()
	rec := grpctest.NewHealth()
	u, _ := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, rec) })
	return rec, u
}

// serveGRPC serves a grpc-go server with the services register adds, on
// loopback over h2c, until the test ends; it returns the server's URL and
// the server, whose Stop ends it at once, as a crash does.
func serveGRPC(t testing.TB, register func(*grpc.Server)) (*url.URL, *grpc.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}, srv
}

func grpcClient(t testing.TB, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// withToken is ctx carrying the call's metadata: the bearer token, when
// given, and pairs.
func withToken(ctx context.Context, token string, pairs ...string) context.Context {
	if token != "" {
		pairs = append(pairs, "authorization", "Bearer "+token)
	}
	return metadata.AppendToOutgoingContext(ctx, pairs...)
}

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestGRPCThroughProxy(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	app, up := grpcApp(t)
	addr := h2cVerifier(t, ks.Verifier(t), up, proxy.UpstreamH2C)
	client := grpcClient(t, addr)
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "admin", TenantID: "tenant-1", SessionID: "session-1", TokenID: "token-1"})

	t.Run("unary with identity", func(t *testing.T) {
		before := app.Calls()
		var trailer metadata.MD
		// The client's own identity metadata must not survive.
		ctx := withToken(callCtx(t), tok, "x-auth-user-id", "someone-else", "x-auth-role", "root")
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatalf("Check = %v, want SERVING", err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check status = %v, want SERVING", resp.GetStatus())
		}
		if got := app.Calls() - before; got != 1 {
			t.Errorf("calls reaching the app = %d, want 1", got)
		}
		md := app.LastMetadata()
		for k, want := range map[string]string{
			"x-auth-user-id": "user-1", "x-auth-role": "admin", "x-auth-tenant-id": "tenant-1",
			"x-auth-session-id": "session-1", "x-auth-token-id": "token-1",
		} {
			if got := md.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("app metadata %s = %q, want [%q]", k, got, want)
			}
		}
		if got := md.Get("x-auth-organization-id"); len(got) != 0 {
			t.Errorf("app metadata x-auth-organization-id = %q, want none (no claim)", got)
		}
		if got := trailer.Get("x-app-trailer"); len(got) != 1 || got[0] != "seen" {
			t.Errorf("client trailer x-app-trailer = %q, want [seen]", got)
		}
	})

	t.Run("app status in trailers", func(t *testing.T) {
		// Unknown service: the app's NOT_FOUND travels in the trailers.
		_, err := client.Check(withToken(callCtx(t), tok), &healthpb.HealthCheckRequest{Service: "nope"})
		if got := status.Code(err); got != codes.NotFound {
			t.Errorf("Check(unknown service) = %v, want NotFound", err)
		}
	})

	t.Run("server streaming", func(t *testing.T) {
		before := app.Calls()
		app.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
		stream, err := client.Watch(withToken(callCtx(t), tok), &healthpb.HealthCheckRequest{Service: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		// Each message must arrive while the stream stays open: the second
		// is sent only after the first was received, so a proxy buffering
		// the stream would block here until the deadline.
		for i, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING} {
			msg, err := stream.Recv()
			if err != nil {
				t.Fatalf("Watch Recv %d = %v, want %v", i, err, want)
			}
			if msg.GetStatus() != want {
				t.Fatalf("Watch Recv %d = %v, want %v", i, msg.GetStatus(), want)
			}
			next := healthpb.HealthCheckResponse_NOT_SERVING
			if i%2 == 1 {
				next = healthpb.HealthCheckResponse_SERVING
			}
			app.SetServingStatus("orders", next)
		}
		if got := app.Calls() - before; got != 1 {
			t.Errorf("calls reaching the app = %d, want 1", got)
		}
		if got := app.LastMetadata().Get("x-auth-user-id"); len(got) != 1 || got[0] != "user-1" {
			t.Errorf("Watch app metadata x-auth-user-id = %q, want [user-1]", got)
		}
	})

	forged := verifytest.NewKeySet(t).Mint(t, verifytest.Claims{Subject: "user-1", Role: "admin"})
	for _, tc := range []struct{ name, token string }{
		{"missing token", ""},
		{"forged token", forged},
		{"malformed token", "not.a.jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := app.Calls()
			_, err := client.Check(withToken(callCtx(t), tc.token), &healthpb.HealthCheckRequest{})
			if got := status.Code(err); got != codes.Unauthenticated {
				t.Errorf("Check = %v, want Unauthenticated", err)
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, "access token") {
				t.Errorf("Check message = %q, want it to name the access token", msg)
			}
			stream, err := client.Watch(withToken(callCtx(t), tc.token), &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = stream.Recv()
			}
			if got := status.Code(err); got != codes.Unauthenticated {
				t.Errorf("Watch = %v, want Unauthenticated", err)
			}
			if got := app.Calls() - before; got != 0 {
				t.Errorf("calls reaching the app = %d, want 0", got)
			}
		})
	}
}

// TestGRPCRefusalShape checks the trailers-only answer on the wire, over
// HTTP/2 and over HTTP/1.1, and that a plain request still gets
// problem+json.
func TestGRPCRefusalShape(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	_, up := grpcApp(t)
	addr := h2cVerifier(t, ks.Verifier(t), up, proxy.UpstreamH2C)
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	clients := map[string]*http.Client{
		"h2c":      h2cClient(t),
		"http/1.1": {Transport: &http.Transport{}},
	}
	for name, c := range clients {
		for _, tc := range []struct {
			ct, wantCT string
		}{
			{"application/grpc", "application/grpc"},
			{"application/grpc+proto", "application/grpc"},
			{"application/grpc-web+proto", "application/grpc-web"},
			{"application/json", "application/problem+json"},
		} {
			t.Run(name+" "+tc.ct, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("\x00\x00\x00\x00\x00"))
				req.Header.Set("Content-Type", tc.ct)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := resp.Header.Get("Content-Type"); got != tc.wantCT {
					t.Errorf("Content-Type = %q, want %q", got, tc.wantCT)
				}
				if tc.wantCT == "application/problem+json" {
					if resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("status = %d, want 401", resp.StatusCode)
					}
					return
				}
				if resp.StatusCode != http.StatusOK || len(body) != 0 {
					t.Errorf("answer = %d with %d body bytes, want 200 with none (trailers-only)", resp.StatusCode, len(body))
				}
				if got := resp.Header.Get("Grpc-Status"); got != "16" {
					t.Errorf("grpc-status = %q, want 16", got)
				}
				if got := resp.Header.Get("Grpc-Message"); got != "missing or invalid access token" {
					t.Errorf("grpc-message = %q, want the percent-encoded refusal", got)
				}
				if got := resp.Header.Get("Www-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want Bearer", got)
				}
			})
		}
	}
}
