package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// The access log is buffered (no write per request), so SIGTERM is where a
// line could be lost: every request answered before it must be in stdout
// once the process has exited.
func TestVerifierAccessLogSurvivesSIGTERM(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Issuer, ks.Audience, ks.TTL = "http://issuer.test", "api", time.Hour
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, ks.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-file", jwks, "--log-level", "info")
	v.waitReady(t)
	tok := ks.Token(t, "user-1")

	const clients, perClient = 8, 50
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				r := do(t, "GET", v.base+"/orders", nil, append(bearer(tok), "X-Request-Id", fmt.Sprintf("sigterm-%d-%d", c, i))...)
				if r.status != http.StatusOK {
					t.Errorf("request %d-%d: status %d, want 200", c, i, r.status)
				}
			}
		})
	}
	wg.Wait()
	v.stop(t)
	// The process has exited; wait for its output to be read to the end.
	v.logs.waitFor(time.Now().Add(30*time.Second), func(string) bool { return false })

	logged := map[string]int{}
	for _, l := range strings.Split(v.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			id, _ := m["request_id"].(string)
			logged[id]++
		}
	}
	for c := range clients {
		for i := range perClient {
			if id := fmt.Sprintf("sigterm-%d-%d", c, i); logged[id] != 1 {
				t.Errorf("access log has %d lines for request %s, want 1", logged[id], id)
			}
		}
	}
}
