package proxy_test

import (
	"net/http"
	"testing"

	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// TestForwardAuthEnvoyGRPCCheck is the check request Envoy's ext_authz HTTP
// service sends for a gRPC call: the call's method and path behind
// path_prefix, its headers that allowed_headers lets through (content-type
// among them here) and no body. Forward-auth answers it in HTTP, never in
// gRPC: Envoy reads only the status, and a 200 with grpc-status 16 would
// let the call through. Envoy itself turns the 401 into grpc-status 16 for
// the gRPC client.
func TestForwardAuthEnvoyGRPCCheck(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	srv := forwardAuthServer(t, ks, proxy.ForwardHeadersEnvoy, true)
	tok := "Bearer " + ks.Token(t, "user-1")
	grpcHeaders := func(auth string) http.Header {
		h := http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}, "Content-Length": {"0"}}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		return h
	}
	for _, tc := range []struct {
		name, path, auth string
		want             int
		user             string
	}{
		{"valid token", "/ext-authz/grpc.health.v1.Health/Check", tok, http.StatusOK, "user-1"},
		{"no path_prefix", "/grpc.health.v1.Health/Watch", tok, http.StatusOK, "user-1"},
		{"no token", "/ext-authz/grpc.health.v1.Health/Check", "", http.StatusUnauthorized, ""},
		{"forged token", "/ext-authz/grpc.health.v1.Health/Check", "Bearer " + verifytest.NewKeySet(t).Token(t, "user-1"), http.StatusUnauthorized, ""},
		// A gRPC method under a public prefix is public as any path is.
		{"public prefix", "/public/grpc.health.v1.Health/Check", "", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, http.MethodPost, srv.URL+tc.path, grpcHeaders(tc.auth))
			if resp.StatusCode != tc.want {
				t.Fatalf("POST %s = %d, want %d", tc.path, resp.StatusCode, tc.want)
			}
			if resp.Header.Get("Grpc-Status") != "" {
				t.Errorf("grpc-status = %q, want none (Envoy maps the HTTP status)", resp.Header.Get("Grpc-Status"))
			}
			if tc.want == http.StatusUnauthorized {
				if got := resp.Header.Get("Content-Type"); got != "application/problem+json" {
					t.Errorf("Content-Type = %q, want application/problem+json", got)
				}
				return
			}
			if got := resp.Header.Get(proxy.HeaderUserID); got != tc.user {
				t.Errorf("%s = %q, want %q", proxy.HeaderUserID, got, tc.user)
			}
		})
	}
}
