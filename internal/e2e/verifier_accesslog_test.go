package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The access log is buffered (no write per request), so SIGTERM is where a
// line could be lost: every request answered before it must be in stdout
// once the process has exited.
func TestVerifierAccessLogSurvivesSIGTERM(t *testing.T) {
	ks, jwks := keySetFile(t)
	ks.TTL = time.Hour
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

// A WebSocket open at SIGTERM keeps working through the shutdown grace,
// the verifier exits once its client has left, and its access log line
// (status 101) is in stdout. Before, the verifier exited at once: the
// server's Shutdown does not wait for a hijacked connection, and the
// tunnel's line, written when it ends, was lost.
func TestVerifierWebSocketThroughSIGTERM(t *testing.T) {
	ks, jwks := keySetFile(t)
	ks.TTL = time.Hour
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, brw) // echoes until the verifier closes its side
	}))
	t.Cleanup(echo.Close)
	v := startVerifier(t, "--upstream", echo.URL, "--jwks-file", jwks, "--log-level", "info")
	v.waitReady(t)

	c, err := net.Dial("tcp", strings.TrimPrefix(v.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer %s\r\nX-Request-Id: ws-1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", ks.Token(t, "user-1"))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the verifier = %v, %v; want 101", res, err)
	}
	echoes := func(what string) {
		t.Helper()
		fmt.Fprintf(c, "%s\n", what)
		if got, err := br.ReadString('\n'); got != what+"\n" {
			t.Fatalf("the tunnel echoed %q, %v; want %q", got, err, what)
		}
	}
	echoes("before")

	if err := v.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.logs.waitFor(time.Now().Add(30*time.Second), func(l string) bool { return strings.Contains(l, `"shutting down"`) }); !ok {
		t.Fatal("the verifier did not log that it is shutting down")
	}
	echoes("during the grace")
	select {
	case <-v.exited:
		t.Fatal("the verifier exited with a WebSocket open inside the grace")
	default:
	}
	c.Close()
	select {
	case <-v.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the verifier did not exit once the WebSocket's client left")
	}
	v.logs.waitFor(time.Now().Add(30*time.Second), func(string) bool { return false })
	var lines []map[string]any
	for _, l := range strings.Split(v.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["request_id"] == "ws-1" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 || lines[0]["status"] != float64(http.StatusSwitchingProtocols) {
		t.Errorf("access log lines for the WebSocket = %v, want one with status 101", lines)
	}
}

// A second SIGTERM (or Ctrl-C) during the shutdown grace ends the verifier
// at once, killed by the signal, instead of waiting out the grace for a
// request the operator no longer cares about; the access lines of the
// requests answered before it are written out first (they used to wait
// for the next 100 ms tick, which the kill came before).
func TestVerifierSecondSignalEndsTheGrace(t *testing.T) {
	_, jwks := keySetFile(t)
	const answered = 4
	hold, some := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	entered := make(chan struct{}, answered+1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := hold
		if r.URL.Query().Get("held") == "" {
			wait = some
		}
		entered <- struct{}{}
		select {
		case <-wait:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(app.Close)
	v := startVerifier(t, "--upstream", app.URL, "--jwks-file", jwks, "--public-path", "/slow", "--log-level", "info")
	v.waitReady(t)
	go func() {
		if resp, err := http.Get(v.base + "/slow?held=1"); err == nil {
			resp.Body.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := range answered {
		wg.Go(func() {
			r := do(t, "GET", fmt.Sprintf("%s/slow?n=%d", v.base, i), nil, "X-Request-Id", fmt.Sprintf("answered-%d", i))
			if r.status != http.StatusOK {
				t.Errorf("request %d during the grace: status %d, want 200", i, r.status)
			}
		})
	}
	for range answered + 1 {
		select {
		case <-entered: // in the app: the grace will wait for it
		case <-time.After(30 * time.Second):
			t.Fatal("the requests did not all reach the app")
		}
	}
	if err := v.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.logs.waitFor(time.Now().Add(30*time.Second), func(l string) bool { return strings.Contains(l, `"shutting down"`) }); !ok {
		t.Fatal("the verifier did not log that it is shutting down")
	}
	close(some)
	wg.Wait() // answered: their lines are queued, the held request keeps the grace going
	if err := v.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the verifier did not end within 15s of the second SIGTERM (its grace is 20s)")
	}
	if ws, ok := v.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the verifier ended with %v, want killed by the second SIGTERM", v.cmd.ProcessState)
	}
	v.logs.waitFor(time.Now().Add(30*time.Second), func(string) bool { return false }) // all output read
	for i := range answered {
		id := fmt.Sprintf(`"request_id":"answered-%d"`, i)
		if !strings.Contains(v.logs.String(), id) {
			t.Errorf("no access line for request %d, answered before the second SIGTERM", i)
		}
	}
}
