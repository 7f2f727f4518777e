package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGRPCPercentEncode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"missing or invalid access token", "missing or invalid access token"},
		{"100% sure", "100%25 sure"},
		{"line\nbreak", "line%0Abreak"},
		{"café", "caf%C3%A9"},
		{"\x7f~", "%7F~"},
	} {
		if got := grpcPercentEncode(tc.in); got != tc.want {
			t.Errorf("grpcPercentEncode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRefuseStatuses maps every refusal to its gRPC status for a gRPC call
// and to its HTTP status otherwise, and forward-auth's gate never to gRPC.
func TestRefuseStatuses(t *testing.T) {
	for _, tc := range []struct {
		why        refusal
		grpcStatus string
		httpStatus int
	}{
		{refuseUnauthenticated, "16", http.StatusUnauthorized},
		{refuseCSRF, "7", http.StatusForbidden},
		{refuseBodyTimeout, "4", http.StatusRequestTimeout},
		{refuseUpstream, "14", http.StatusBadGateway},
	} {
		for _, g := range []*gate{{}, {httpOnly: true}} {
			for _, ct := range []string{"application/grpc", "text/plain"} {
				r := httptest.NewRequest(http.MethodPost, "/svc/Method", nil)
				r.Header.Set("Content-Type", ct)
				w := httptest.NewRecorder()
				g.refuse(w, r, tc.why)
				asGRPC := !g.httpOnly && ct == "application/grpc"
				gotGRPC := w.Header().Get("Grpc-Status")
				switch {
				case asGRPC && (w.Code != http.StatusOK || gotGRPC != tc.grpcStatus || w.Body.Len() != 0):
					t.Errorf("refuse(%d) of a gRPC call = %d, grpc-status %q, %d body bytes; want 200, %s, none", tc.why, w.Code, gotGRPC, w.Body.Len(), tc.grpcStatus)
				case !asGRPC && (w.Code != tc.httpStatus || gotGRPC != ""):
					t.Errorf("refuse(%d) (httpOnly %v, %s) = %d, grpc-status %q; want %d, none", tc.why, g.httpOnly, ct, w.Code, gotGRPC, tc.httpStatus)
				}
			}
		}
	}
}
