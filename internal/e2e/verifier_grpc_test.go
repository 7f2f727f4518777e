package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palisade-auth/palisade/internal/grpctest"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// readmeGRPCArgs returns the flags of the README's gRPC example, after
// "./bin/verifier serve", with the app's and the key set's addresses replaced.
func readmeGRPCArgs(t *testing.T, app, jwksURL string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.ReplaceAll(shBlock(t, string(raw), "### gRPC and HTTP/2"), "\\\n", " ")
	args := strings.Fields(cmd)
	if len(args) < 2 || args[0] != "./bin/verifier" || args[1] != "serve" {
		t.Fatalf("the README's gRPC example is no longer ./bin/verifier serve ...: %q", cmd)
	}
	for i, a := range args {
		switch a {
		case "http://127.0.0.1:50051":
			args[i] = "http://" + app
		case "http://localhost:8080/.well-known/jwks.json":
			args[i] = jwksURL
		}
	}
	return args[2:]
}

// grpcVerifier serves a grpc-go server with the services register adds,
// runs the README's gRPC example, the real verifier binary with
// --upstream-protocol h2c and the flags in extra, in front of it, and
// returns the key set its tokens must come from, the verifier and a grpc-go
// client connection to it over h2c.
func grpcVerifier(t *testing.T, register func(*grpc.Server), extra ...string) (*verifytest.KeySet, *verifierProc, *grpc.ClientConn) {
	t.Helper()
	return grpcVerifierWith(t, grpcApp{register: register}, extra...)
}

// grpcApp is the grpc-go server behind the verifier.
type grpcApp struct {
	register func(*grpc.Server)
	options  []grpc.ServerOption
	// relay, when set, returns the address the verifier is given for the
	// app's: a relay to it.
	relay func(app string) string
}

// grpcVerifierWith is grpcVerifier with the app's server options, and
// optionally a relay between the verifier and the app.
func grpcVerifierWith(t *testing.T, app grpcApp, extra ...string) (*verifytest.KeySet, *verifierProc, *grpc.ClientConn) {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	ks.Issuer, ks.Audience = "http://localhost:8080", "api"
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(ks.JWKS())
	}))
	t.Cleanup(keys.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(app.options...)
	app.register(srv)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	addr := ln.Addr().String()
	if app.relay != nil {
		addr = app.relay(addr)
	}

	v := startVerifier(t, append(readmeGRPCArgs(t, addr, keys.URL+"/.well-known/jwks.json"), extra...)...)
	v.waitReady(t)
	conn, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(v.base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ks, v, conn
}

// TestVerifierGRPCQuietStream: through the real binary, a bidirectional
// call whose client is quiet for longer than --read-idle-timeout after its
// first message goes on, with the identity, to its clean end.
func TestVerifierGRPCQuietStream(t *testing.T) {
	ks, v, conn := grpcVerifier(t, func(s *grpc.Server) { testpb.RegisterTestServiceServer(s, &grpctest.Echo{}) }, "--read-idle-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok := ks.Token(t, "user-1")
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok, "x-auth-user-id", "admin")
	stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	grpctest.EchoQuietly(t, stream, func() { grpctest.OutwaitBodyTimeout(t, strings.TrimPrefix(v.base, "http://"), tok) })
}

// TestVerifierGRPCPublicHealth: with the health service's methods public,
// as a kubelet gRPC probe through the verifier needs, a Check without a
// token reaches the app, with no identity but what the client claimed
// removed; any other method of the same server still needs a token.
func TestVerifierGRPCPublicHealth(t *testing.T) {
	app := grpctest.NewHealth()
	_, _, conn := grpcVerifier(t, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, app)
		testpb.RegisterTestServiceServer(s, &grpctest.Echo{})
	}, "--public-path", "/grpc.health.v1.Health/*")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(metadata.AppendToOutgoingContext(ctx, "x-auth-user-id", "admin"), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check without a token = %v, %v; want SERVING from the app", resp.GetStatus(), err)
	}
	if got := app.Calls(); got != 1 {
		t.Errorf("calls reaching the app = %d, want 1", got)
	}
	for k, v := range app.LastMetadata() {
		if strings.HasPrefix(k, "x-auth-") {
			t.Errorf("app metadata %s = %q on a public call, want no x-auth-* at all", k, v)
		}
	}
	stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("FullDuplexCall without a token = %v, want Unauthenticated", err)
	}
	// A gRPC server routes on the path's last '/': to it this is the
	// service grpc.health.v1.Health/grpc.testing.TestService, which an
	// app forwarding unknown services would pass on. The public prefix
	// covers /Service/Method paths only (it reached the app, answering
	// Unimplemented, before).
	err = conn.Invoke(ctx, "/grpc.health.v1.Health/grpc.testing.TestService/EmptyCall", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a three-segment method under the public prefix, without a token = %v, want Unauthenticated", err)
	}
	if got := app.Calls(); got != 1 {
		t.Errorf("calls reaching the health service = %d, want 1", got)
	}
}

// TestVerifierGRPC runs the README's gRPC example, the real verifier binary
// with --upstream-protocol h2c, in front of a grpc-go server, called by a
// grpc-go client over h2c.
func TestVerifierGRPC(t *testing.T) {
	app := grpctest.NewHealth()
	ks, v, conn := grpcVerifier(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, app) })
	client := healthpb.NewHealthClient(conn)
	call := func(t *testing.T, token string) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		return ctx
	}
	// The access log's line for the call sent with x-request-id id carries
	// the call's gRPC status beside HTTP's 200.
	wantLogged := func(t *testing.T, id string, code codes.Code) {
		t.Helper()
		line, ok := v.logs.waitFor(time.Now().Add(10*time.Second), func(l string) bool {
			return strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"request_id":"`+id+`"`)
		})
		if !ok {
			t.Fatalf("no access log line for request %s in 10 s", id)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["status"] != float64(200) || m["grpc_status"] != float64(code) {
			t.Errorf("access log line: status %v grpc_status %v, want 200 and %d: %s", m["status"], m["grpc_status"], code, line)
		}
	}
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "user", SessionID: "session-1", TokenID: "token-1"})

	t.Run("unary reaches the app with the identity", func(t *testing.T) {
		before := app.Calls()
		ctx := metadata.AppendToOutgoingContext(call(t, tok), "x-auth-user-id", "admin", "x-request-id", "grpc-check-ok")
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check = %v, %v; want SERVING\n%s", resp.GetStatus(), err, v.logs.String())
		}
		wantLogged(t, "grpc-check-ok", codes.OK)
		if got := app.Calls() - before; got != 1 {
			t.Errorf("calls reaching the app = %d, want 1", got)
		}
		md := app.LastMetadata()
		for k, want := range map[string]string{"x-auth-user-id": "user-1", "x-auth-role": "user", "x-auth-session-id": "session-1", "x-auth-token-id": "token-1"} {
			if got := md.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("app metadata %s = %q, want [%q]", k, got, want)
			}
		}
	})

	t.Run("the app's own error status reaches the client and the log", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(call(t, tok), "x-request-id", "grpc-check-unknown")
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "no-such-service"})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("Check of an unknown service = %v, want NotFound from the app", err)
		}
		wantLogged(t, "grpc-check-unknown", codes.NotFound)
	})

	t.Run("server streaming flushes each message", func(t *testing.T) {
		app.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
		stream, err := client.Watch(call(t, tok), &healthpb.HealthCheckRequest{Service: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		// The second status is set only once the first has arrived.
		for i, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING} {
			msg, err := stream.Recv()
			if err != nil || msg.GetStatus() != want {
				t.Fatalf("Watch Recv %d = %v, %v; want %v", i, msg.GetStatus(), err, want)
			}
			app.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING)
		}
		if got := app.LastMetadata().Get("x-auth-user-id"); len(got) != 1 || got[0] != "user-1" {
			t.Errorf("Watch app metadata x-auth-user-id = %q, want [user-1]", got)
		}
	})

	forged := verifytest.NewKeySet(t)
	forged.Issuer, forged.Audience = ks.Issuer, ks.Audience
	for _, tc := range []struct{ name, token string }{
		{"missing token", ""},
		{"forged token", forged.Token(t, "user-1")},
	} {
		t.Run(tc.name+" is unauthenticated and never reaches the app", func(t *testing.T) {
			before := app.Calls()
			id := "grpc-refused-" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := client.Check(metadata.AppendToOutgoingContext(call(t, tc.token), "x-request-id", id), &healthpb.HealthCheckRequest{})
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "access token") {
				t.Errorf("Check = %v, want Unauthenticated from the verifier", err)
			}
			wantLogged(t, id, codes.Unauthenticated)
			stream, err := client.Watch(call(t, tc.token), &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("Watch = %v, want Unauthenticated", err)
			}
			if got := app.Calls() - before; got != 0 {
				t.Errorf("calls reaching the app = %d, want 0", got)
			}
		})
	}
}
