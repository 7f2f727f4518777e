package e2e

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestServerWideOptions: OPTIONS *, a question about the server rather
// than a resource, gets net/http's answer (200, no body) from both
// binaries, now with an X-Request-Id and an access log line as every other
// answer has; net/http answered it before any middleware, with neither.
// The verifier answers it itself: nothing reaches the app.
func TestServerWideOptions(t *testing.T) {
	a := newApp(t)
	_, jwks := keySetFile(t)
	v := startVerifier(t, "--jwks-file", jwks, "--upstream", a.srv.URL)
	is := startIssuer(t, testdb.SQLite(t))
	for _, s := range []struct {
		name string
		base string
		p    *proc
	}{{"verifier", v.base, v.proc}, {"issuer", is.base, is.proc}} {
		t.Run(s.name, func(t *testing.T) {
			resp := optionsStar(t, s.base)
			id := resp.Header.Get("X-Request-Id")
			if resp.StatusCode != http.StatusOK || id == "" {
				t.Fatalf("OPTIONS * = %d, X-Request-Id %q; want 200 and an id", resp.StatusCode, id)
			}
			if _, ok := s.p.logs.waitFor(time.Now().Add(10*time.Second), func(l string) bool {
				return strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"request_id":"`+id+`"`) && strings.Contains(l, `"path":"*"`)
			}); !ok {
				t.Errorf("no access log line for OPTIONS * (request %s):\n%s", id, s.p.logs.String())
			}
		})
	}
	if got := a.hits.Load(); got != 0 {
		t.Errorf("requests reaching the app = %d, want 0", got)
	}
}

// TestForwardAuthJudgesServerWideOptions: in forward-auth mode a 200 means
// "allowed", so OPTIONS * is judged as any request: without a token, 401.
// It was answered 200 as a question about the server.
func TestForwardAuthJudgesServerWideOptions(t *testing.T) {
	_, jwks := keySetFile(t)
	v := startVerifier(t, "--jwks-file", jwks, "--mode", "forward-auth", "--forward-auth-headers", "envoy")
	if resp := optionsStar(t, v.base); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forward-auth OPTIONS * without a token = %d, want 401", resp.StatusCode)
	}
}

// optionsStar sends OPTIONS * to base (which Go's client cannot send) and
// returns the answer, its body closed.
func optionsStar(t *testing.T, base string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
