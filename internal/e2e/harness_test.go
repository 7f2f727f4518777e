// Package e2e drives the real binaries over loopback HTTP, as a client
// would, on SQLite and on PostgreSQL.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "palisade-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, name := range []string{"issuer", "verifier"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../../cmd/"+name)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", name, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// backend is one database the suite runs on.
type backend struct {
	name string
	url  func(t testing.TB) string
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t testing.TB) string { return testdb.SQLite(t) }},
		{"postgres", func(t testing.TB) string { return testdb.Postgres(t) }},
	}
}

// forEachBackend runs fn once per database.
func forEachBackend(t *testing.T, fn func(t *testing.T, dbURL string)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.url(t))
		})
	}
}

// logBuffer collects a process's output, line by line, and lets a test
// wait for a line.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	cond  *sync.Cond
	done  bool
}

func newLogBuffer() *logBuffer {
	b := &logBuffer{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *logBuffer) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.mu.Lock()
		b.lines = append(b.lines, sc.Text())
		b.cond.Broadcast()
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.done = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// waitFor returns the first line for which match is true, or false when the
// process ended (or the deadline passed) first.
func (b *logBuffer) waitFor(deadline time.Time, match func(string) bool) (string, bool) {
	stop := time.AfterFunc(time.Until(deadline), func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; ; {
		for ; i < len(b.lines); i++ {
			if match(b.lines[i]) {
				return b.lines[i], true
			}
		}
		if b.done || time.Now().After(deadline) {
			return "", false
		}
		b.cond.Wait()
	}
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// proc is a running binary.
type proc struct {
	cmd    *exec.Cmd
	logs   *logBuffer
	addr   map[string]string // server name -> host:port
	exited chan struct{}
}

// stop sends SIGTERM and waits for the process to exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("process did not exit after SIGTERM")
	}
}

// startWrapped runs a binary with args and waits until each named server
// logs that it is listening. A non-nil wrap is a command that runs the
// binary by executing its arguments (memoryCgroup's, which first puts
// itself in a cgroup).
func startWrapped(t testing.TB, wrap []string, bin string, servers []string, env []string, args ...string) *proc {
	t.Helper()
	argv := slices.Concat(wrap, []string{filepath.Join(binDir, bin)}, args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{cmd: cmd, logs: newLogBuffer(), addr: map[string]string{}}
	go p.logs.consume(pr)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", bin, p.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range servers {
		line, ok := p.logs.waitFor(deadline, func(l string) bool {
			var m map[string]any
			return json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "listening" && m["server"] == name
		})
		if !ok {
			t.Fatalf("%s did not start server %q; output:\n%s", bin, name, p.logs.String())
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		p.addr[name], _ = m["addr"].(string)
	}
	return p
}

// issuer is a running issuer and its database.
type issuer struct {
	*proc
	base  string
	dbURL string
	kek   string
}

// kekFile writes a fresh key-encryption key for a test.
func kekFile(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// generousLimits lifts every rate limit far above what a functional test
// sends from its one address; tests of the limits pass their own
// --rate-limit after these, and the later flag wins.
func generousLimits() []string {
	var args []string
	for _, name := range ratelimit.Names() {
		args = append(args, "--rate-limit", name+"=100000/1m")
	}
	return args
}

func startIssuer(t testing.TB, dbURL string, extra ...string) *issuer {
	t.Helper()
	return startIssuerWithKEK(t, dbURL, kekFile(t), extra...)
}

// startIssuerWithKEK starts an issuer with a given key-encryption key: a
// second replica over the same database needs the first one's.
func startIssuerWithKEK(t testing.TB, dbURL, kek string, extra ...string) *issuer {
	t.Helper()
	return startIssuerWrapped(t, nil, dbURL, kek, extra...)
}

// startIssuerWrapped is startIssuerWithKEK with the issuer run by wrap
// (startWrapped).
func startIssuerWrapped(t testing.TB, wrap []string, dbURL, kek string, extra ...string) *issuer {
	t.Helper()
	args := append([]string{"serve",
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--database-url", dbURL, "--kek-file", kek,
		"--issuer-url", "http://issuer.test", "--audience", "api",
		"--log-level", "debug", "--key-reload-interval", "1s",
	}, generousLimits()...)
	args = append(args, extra...)
	p := startWrapped(t, wrap, "issuer", []string{"api", "admin"}, nil, args...)
	return &issuer{proc: p, base: "http://" + p.addr["api"], dbURL: dbURL, kek: kek}
}

// serveRefused runs issuer serve on loopback with args and returns what it
// printed, failing t unless it exits with an error within 30 s.
func serveRefused(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "issuer"), append([]string{"serve",
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Errorf("issuer serve %q = %v, want it to exit with an error\n%s", args, err, out)
	}
	return string(out)
}

// cli runs an issuer subcommand against the same database and keys.
func (is *issuer) cli(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	// The database flags go before a "--", after which all is arguments.
	flags := []string{"--database-url", is.dbURL, "--kek-file", is.kek}
	if i := slices.Index(args, "--"); i >= 0 {
		args = slices.Concat(args[:i], flags, args[i:])
	} else {
		args = append(args, flags...)
	}
	cmd := exec.Command(filepath.Join(binDir, "issuer"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openStore opens the issuer's database to check what a request left there.
func openStore(t testing.TB, dbURL string) store.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

var client = &http.Client{Timeout: 30 * time.Second}

// do sends a request. body may be nil, a string/[]byte (sent as is) or any
// value (sent as JSON). headers are name, value pairs.
func do(t testing.TB, method, url string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, contentType = strings.NewReader(b), "application/json"
	case []byte:
		rd, contentType = bytes.NewReader(b), "application/json"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd, contentType = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return send(t, req)
}

// send performs req and reads the whole answer.
func send(t testing.TB, req *http.Request) response {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// wantStatus fails the test when r's status is not want.
func wantStatus(t testing.TB, what string, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: status = %d, want %d; body %s", what, r.status, want, r.body)
	}
}

// wantProblem checks a problem+json answer.
func wantProblem(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	wantStatus(t, what, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type = %q, want application/problem+json", what, ct)
	}
	m := r.json(t)
	if m["code"] != code || int(m["status"].(float64)) != status {
		t.Errorf("%s: problem = %s, want code %q status %d", what, r.body, code, status)
	}
}

const strongPassword = "correct horse battery staple"

var emailSeq struct {
	sync.Mutex
	n int
}

func uniqueEmail() string {
	emailSeq.Lock()
	defer emailSeq.Unlock()
	emailSeq.n++
	return fmt.Sprintf("user%d-%d@example.com", emailSeq.n, time.Now().UnixNano())
}

// tokens is a decoded token response.
type tokens struct {
	Access, Refresh, SessionID string
}

func register(t testing.TB, is *issuer, email string) map[string]any {
	t.Helper()
	r := do(t, "POST", is.base+"/v1/register", map[string]string{"email": email, "password": strongPassword})
	wantStatus(t, "register", r, http.StatusCreated)
	return r.json(t)
}

func login(t *testing.T, is *issuer, email, password, device string) tokens {
	t.Helper()
	r := do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": password, "device_id": device})
	wantStatus(t, "login", r, http.StatusOK)
	m := r.json(t)
	return tokens{Access: m["access_token"].(string), Refresh: m["refresh_token"].(string), SessionID: m["session_id"].(string)}
}

func refresh(t *testing.T, is *issuer, rt string) response {
	t.Helper()
	return do(t, "POST", is.base+"/v1/refresh", map[string]string{"refresh_token": rt})
}
