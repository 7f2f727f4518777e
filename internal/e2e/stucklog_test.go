package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stuckStdout starts the verifier with its stdout on a pipe the test stops
// reading once both servers are listening, as a log shipper that hangs
// leaves it. It returns the verifier, its proxy and admin addresses, and
// the pipe's read end.
func stuckStdout(t *testing.T, stderr *lockedBuffer, args ...string) (cmd *exec.Cmd, proxy, admin string, out *os.File) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	cmd = exec.Command(filepath.Join(binDir, "verifier"), append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--issuer", "http://issuer.test", "--audience", "api", "--log-level", "info"}, args...)...)
	cmd.Stdout, cmd.Stderr = pw, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	br := bufio.NewReader(pr)
	addr := map[string]string{}
	for len(addr) < 2 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("verifier output ended before both servers listened: %v", err)
		}
		var m struct{ Msg, Server, Addr string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "listening" {
			addr[m.Server] = m.Addr
		}
	}
	return cmd, "http://" + addr["proxy"], "http://" + addr["admin"], pr
}

// lockedBuffer is a bytes.Buffer a process's output and the test may use
// at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A log output that takes nothing (a full stdout pipe nobody reads) costs
// log lines, never requests or the shutdown: every request is answered
// while lines are dropped and counted on /metrics, and SIGTERM ends the
// process once the log's drain timeout has passed, with an error saying
// what was lost. The verifier used to hold every request on the pipe and
// never exit.
func TestVerifierStuckLogOutputHoldsNothing(t *testing.T) {
	ks, jwks := keySetFile(t)
	ks.TTL = time.Hour
	a := newApp(t)
	var stderr lockedBuffer
	cmd, proxy, admin, out := stuckStdout(t, &stderr, "--upstream", a.srv.URL, "--jwks-file", jwks)
	tok := ks.Token(t, "user-1")
	client := &http.Client{Timeout: 10 * time.Second}

	dropped := func() float64 {
		t.Helper()
		r := do(t, "GET", admin+"/metrics", nil)
		for _, l := range strings.Split(string(r.body), "\n") {
			if v, ok := strings.CutPrefix(l, "verifier_log_lines_dropped_total "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatalf("/metrics has no verifier_log_lines_dropped_total:\n%s", r.body)
		return 0
	}
	// The pipe takes 64 KiB and the queue 4 MiB: a few tens of thousands
	// of lines fill both.
	const clients, perRound, maxRounds = 8, 250, 40
	for round := 0; dropped() == 0; round++ {
		if round == maxRounds {
			t.Fatalf("no log line dropped after %d requests with stdout stuck", round*clients*perRound)
		}
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for range perRound {
					req, _ := http.NewRequest("GET", proxy+"/orders", nil)
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
					if err != nil {
						t.Errorf("with stdout stuck a request failed: %v", err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("with stdout stuck a request got %d, want 200", resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the verifier did not exit within 30s of SIGTERM with stdout stuck (its log drain timeout is 5s)")
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "log output did not take the queued lines") {
		t.Errorf("with stdout stuck the verifier exited %d (%v), stderr %q; want 1 and the lines it could not write", code, err, stderr.String())
	}
	// What reached the pipe is whole lines, but for the end of a write
	// the exit cut short: the pipe took the part it had room for.
	rest, _ := io.ReadAll(out)
	lines := strings.Split(string(rest), "\n")
	for _, l := range lines[:len(lines)-1] {
		if !json.Valid([]byte(l)) {
			t.Fatalf("stdout has a line that is not whole JSON: %.80q", l)
		}
	}
}
