package proxy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinariesDoNotLinkGRPC: grpc-go is a test dependency only (the gRPC
// tests' client and server); the verifier speaks gRPC's HTTP/2 through
// net/http and neither binary may link it.
func TestBinariesDoNotLinkGRPC(t *testing.T) {
	for _, cmd := range []string{"cmd/verifier", "cmd/issuer"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/palisade-auth/palisade/"+cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", cmd, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 50 {
			t.Fatalf("go list -deps %s listed %d packages; the check would prove nothing", cmd, len(deps))
		}
		for _, d := range deps {
			if d == "google.golang.org/grpc" || strings.HasPrefix(d, "google.golang.org/grpc/") {
				t.Errorf("%s links %s, a test-only dependency", cmd, d)
			}
		}
	}
}
