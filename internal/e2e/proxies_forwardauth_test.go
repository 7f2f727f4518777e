package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// The README's nginx and Caddy forward-auth examples, run verbatim (only
// the addresses change) with Debian's nginx and caddy in front of the real
// verifier (keys from a real issuer, which also mints the token) and an app
// that records what reached it.

const (
	fwdAppOrigin  = "https://app.example.com"
	fwdEvilOrigin = "https://evil.example"
)

// proxyBinary finds a Debian package's binary: skipped loudly on a laptop
// without it, fatal in CI, which installs it.
func proxyBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	if testdb.CIRequired() {
		t.Fatalf("CI=true but no %s on PATH: .ci/run installs Debian's %s package", name, name)
	}
	t.Skipf("SKIPPED: no %s on PATH; the README's %s example needs Debian's %s package (apt-get install %s)", name, name, name, name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// fencedBlock returns the first ```lang block after heading in the README.
func fencedBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i := strings.Index(readme, heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("%s has no %s block", heading, lang)
	}
	rest = rest[start+len("```"+lang+"\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("unterminated %s block", lang)
	}
	return rest[:end]
}

// substitute replaces each old with its new in block, failing when one is
// missing: the example changed shape and this test must follow.
func substitute(t *testing.T, block string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(block, pairs[i]) {
			t.Fatalf("the README example no longer contains %q; update this test:\n%s", pairs[i], block)
		}
		block = strings.ReplaceAll(block, pairs[i], pairs[i+1])
	}
	return block
}

// identity is who the test's access token names, as the issuer minted it.
type identity struct {
	access, userID, sessionID, tokenID string
}

// forwardAuthVerifier starts a real issuer (SQLite), logs a user in, and
// starts the real verifier in forward-auth mode with contract in front of
// the issuer's keys, trusting loopback, /healthz public and browser
// cookies on.
func forwardAuthVerifier(t *testing.T, contract string) (*verifierProc, identity) {
	t.Helper()
	is := startIssuer(t, testdb.SQLite(t))
	email := uniqueEmail()
	me := register(t, is, email)
	tok := login(t, is, email, strongPassword, "laptop")
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok.Access, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Jti string }
	if err := json.Unmarshal(raw, &claims); err != nil || claims.Jti == "" {
		t.Fatalf("access token claims %s: no jti (%v)", raw, err)
	}
	v := startVerifier(t, "--mode", "forward-auth", "--forward-auth-headers", contract, "--trusted-proxies", "127.0.0.1/32",
		"--jwks-url", is.base+"/.well-known/jwks.json", "--public-path", "/healthz", "--browser-origins", fwdAppOrigin)
	v.waitReady(t)
	return v, identity{access: tok.Access, userID: me["id"].(string), sessionID: tok.SessionID, tokenID: claims.Jti}
}

// runProxy starts a proxy process and waits until addr accepts
// connections; its output is shown when the test fails.
func runProxy(t *testing.T, addr string, cmd *exec.Cmd) {
	t.Helper()
	logs := newLogBuffer()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	go logs.consume(pr)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	pw.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before listening on %s:\n%s", filepath.Base(cmd.Path), addr, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s within 60s:\n%s", filepath.Base(cmd.Path), addr, logs.String())
		}
	}
}

// startNginx runs the README's nginx server block inside a minimal main
// configuration whose paths all live in a temp directory.
func startNginx(t *testing.T, verifierAddr, appAddr string) string {
	t.Helper()
	bin := proxyBinary(t, "nginx")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	server := substitute(t, fencedBlock(t, "### Forward-auth mode", "nginx"),
		"listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", port),
		"127.0.0.1:8081", verifierAddr,
		"127.0.0.1:3000", appAddr)
	conf := fmt.Sprintf(`worker_processes 1;
error_log %[1]s/error.log info;
pid %[1]s/nginx.pid;
events { worker_connections 64; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, server)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	runProxy(t, addr, exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;"))
	t.Cleanup(func() {
		if t.Failed() {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error.log:\n%s", errLog)
		}
	})
	return "http://" + addr
}

// startCaddy runs the README's Caddyfile site block, with a global block
// that turns off what a test does not want: the admin endpoint and HTTPS.
func startCaddy(t *testing.T, verifierAddr, appAddr string) string {
	t.Helper()
	bin := proxyBinary(t, "caddy")
	dir := t.TempDir()
	port := freePort(t)
	site := substitute(t, fencedBlock(t, "### Forward-auth mode", "caddy"),
		"http://:80", fmt.Sprintf("http://127.0.0.1:%d", port),
		"127.0.0.1:8081", verifierAddr,
		"127.0.0.1:3000", appAddr)
	conf := "{\n\tadmin off\n\tauto_https off\n}\n\n" + site
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	runProxy(t, addr, cmd)
	return "http://" + addr
}

// request sends one request with headers exactly as given.
func request(t *testing.T, method, url string, h http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return send(t, req)
}

func TestProxiesReadmeNginx(t *testing.T) {
	t.Parallel()
	v, id := forwardAuthVerifier(t, "nginx")
	a := newApp(t)
	base := startNginx(t, v.addr["proxy"], strings.TrimPrefix(a.srv.URL, "http://"))
	testReadmeForwardAuth(t, v, id, a, base, false)
}

func TestProxiesReadmeCaddy(t *testing.T) {
	t.Parallel()
	v, id := forwardAuthVerifier(t, "caddy")
	a := newApp(t)
	base := startCaddy(t, v.addr["proxy"], strings.TrimPrefix(a.srv.URL, "http://"))
	testReadmeForwardAuth(t, v, id, a, base, true)
}

// testReadmeForwardAuth runs the attacks of the audit, and the positive
// cases, through a proxy configured as the README says. problemBodies says
// whether the proxy passes the verifier's refusals through (Caddy) or
// answers them with its own page (nginx).
func testReadmeForwardAuth(t *testing.T, v *verifierProc, id identity, a *app, base string, problemBodies bool) {
	tok := id.access

	t.Run("public path reaches the app", func(t *testing.T) {
		before := a.hits.Load()
		wantStatus(t, "GET /healthz", request(t, "GET", base+"/healthz", nil), http.StatusOK)
		if a.hits.Load() != before+1 {
			t.Fatalf("app hits = %d, want %d", a.hits.Load(), before+1)
		}
	})

	t.Run("a client's original-URI header naming a public path", func(t *testing.T) {
		for _, name := range []string{"X-Forwarded-Uri", "X-Original-URI", "x-forwarded-uri"} {
			before := a.hits.Load()
			r := request(t, "GET", base+"/private", http.Header{name: {"/healthz"}, "X-Forwarded-Method": {"GET"}})
			if r.status != http.StatusUnauthorized {
				t.Errorf("GET /private with %s: /healthz = %d, want 401; body %s", name, r.status, r.body)
			}
			if n := a.hits.Load() - before; n != 0 {
				t.Errorf("app reached %d times with %s: /healthz and no token, want 0", n, name)
			}
		}
	})

	t.Run("no token", func(t *testing.T) {
		before := a.hits.Load()
		wantStatus(t, "GET /private", request(t, "GET", base+"/private", nil), http.StatusUnauthorized)
		if n := a.hits.Load() - before; n != 0 {
			t.Errorf("app reached %d times without a token, want 0", n)
		}
	})

	t.Run("valid token reaches the app with its identity", func(t *testing.T) {
		r := request(t, "GET", base+"/private", http.Header{"Authorization": {"Bearer " + tok}})
		wantStatus(t, "GET /private with a token", r, http.StatusOK)
		if got := a.last().Get("X-Auth-User-Id"); got != id.userID {
			t.Errorf("app saw X-Auth-User-Id %q, want %s", got, id.userID)
		}
	})

	t.Run("spoofed identity headers beside a valid token", func(t *testing.T) {
		h := http.Header{"Authorization": {"Bearer " + tok}}
		for _, name := range []string{"X-Auth-User-Id", "X-Auth-Role", "X-Auth-Tenant-Id", "X-Auth-Organization-Id", "X-Auth-Session-Id", "X-Auth-Token-Id"} {
			h[name] = []string{"evil"}
		}
		h["x-auth-tenant-id"] = []string{"evil-lower"}
		h["X_Auth_Organization_Id"] = []string{"evil-underscore"}
		h["X-Auth_Tenant-Id"] = []string{"evil-mixed"}
		r := request(t, "GET", base+"/private", h)
		wantStatus(t, "GET /private with spoofed headers", r, http.StatusOK)
		got := authHeaders(a.last())
		want := map[string]string{"X-Auth-User-Id": id.userID, "X-Auth-Role": "user", "X-Auth-Session-Id": id.sessionID, "X-Auth-Token-Id": id.tokenID}
		for name, vals := range got {
			w, ok := want[name]
			switch {
			case !ok && (len(vals) == 0 || (len(vals) == 1 && vals[0] == "")):
				// An empty header for a claim the token lacks is fine.
			case !ok:
				t.Errorf("app saw %s = %q, want it absent or empty (the token has no such claim)", name, vals)
			case len(vals) != 1 || vals[0] != w:
				t.Errorf("app saw %s = %q, want [%q]", name, vals, w)
			}
		}
		for name, w := range want {
			if _, ok := got[name]; !ok {
				t.Errorf("app saw no %s, want %q", name, w)
			}
		}
	})

	cookie := "__Host-access_token=" + tok + "; __Host-csrf_token=c5rf"
	t.Run("cross-site POST with the access cookie", func(t *testing.T) {
		before := a.hits.Load()
		r := request(t, "POST", base+"/private", http.Header{"Cookie": {cookie}, "Origin": {fwdEvilOrigin}})
		wantStatus(t, "cross-site POST", r, http.StatusForbidden)
		if problemBodies && !strings.Contains(string(r.body), `"code":"csrf_failed"`) {
			t.Errorf("cross-site POST body = %s, want code csrf_failed", r.body)
		}
		if n := a.hits.Load() - before; n != 0 {
			t.Errorf("app reached %d times by a cross-site POST, want 0", n)
		}
		if _, ok := v.logs.waitFor(time.Now().Add(10*time.Second), func(l string) bool {
			return strings.Contains(l, "failed the CSRF check") && strings.Contains(l, `"method":"POST"`)
		}); !ok {
			t.Errorf("verifier did not log a failed CSRF check of a POST")
		}
	})

	t.Run("cookie GET needs no CSRF proof", func(t *testing.T) {
		r := request(t, "GET", base+"/private", http.Header{"Cookie": {cookie}, "Origin": {fwdEvilOrigin}})
		wantStatus(t, "cookie GET (the proxy tells the method)", r, http.StatusOK)
	})

	t.Run("the app never receives the refresh or CSRF cookie", func(t *testing.T) {
		secrets := "__Host-refresh_token=r3fresh; __Host-csrf_token=c5rf"
		for _, tc := range []struct {
			name, path string
			h          http.Header
			want       []string // the app's Cookie header; nil for none at all
		}{
			{"access, refresh, CSRF and another cookie, and a client's X-Auth-Cookie", "/private",
				http.Header{"Cookie": {"__Host-access_token=" + tok + "; " + secrets + "; theme=dark"}, "X-Auth-Cookie": {"evil=1"}},
				[]string{"__Host-access_token=" + tok + "; theme=dark"}},
			{"refresh and CSRF cookies beside a bearer token", "/private",
				http.Header{"Cookie": {secrets}, "Authorization": {"Bearer " + tok}}, nil},
			{"refresh and CSRF cookies on a public path", "/healthz", http.Header{"Cookie": {secrets}}, nil},
			// A browser's jar: nginx refused the verifier's answer (500)
			// past its 4 KiB buffer when it carried the cookies twice.
			{"a 6 KB jar with the refresh cookie", "/healthz", http.Header{"Cookie": {"big=" + strings.Repeat("x", 6000) + "; " + secrets}},
				[]string{"big=" + strings.Repeat("x", 6000)}},
		} {
			r := request(t, "GET", base+tc.path, tc.h)
			wantStatus(t, "GET "+tc.path+" with "+tc.name, r, http.StatusOK)
			got, ok := a.last()["Cookie"]
			switch {
			case tc.want == nil && ok:
				t.Errorf("%s: app saw Cookie %q, want no Cookie header at all", tc.name, got)
			case tc.want != nil && !slices.Equal(got, tc.want):
				t.Errorf("%s: app saw Cookie %q, want %q", tc.name, got, tc.want)
			}
			if v := a.last().Get("X-Auth-Cookie"); v != "" {
				t.Errorf("%s: app saw X-Auth-Cookie %q, want none", tc.name, v)
			}
		}
	})

	t.Run("h2c upgrade on a public path, then a private request on the connection", func(t *testing.T) {
		a.mu.Lock()
		seenBefore := len(a.seen)
		a.mu.Unlock()
		host := strings.TrimPrefix(base, "http://")
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(conn)
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", host)
		first, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read the answer to the upgrade: %v", err)
		}
		io.Copy(io.Discard, first.Body)
		first.Body.Close()
		if first.StatusCode == http.StatusSwitchingProtocols {
			t.Fatalf("h2c upgrade = 101, want it refused or ignored")
		}
		fmt.Fprintf(conn, "GET /private HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		if second, err := http.ReadResponse(br, nil); err == nil {
			second.Body.Close()
			if second.StatusCode != http.StatusUnauthorized {
				t.Errorf("private request after the upgrade = %d, want 401", second.StatusCode)
			}
		} // else the proxy closed the connection: nothing went through.
		a.mu.Lock()
		defer a.mu.Unlock()
		if n := len(a.seen) - seenBefore; n > 1 {
			t.Errorf("app reached %d times, want at most once (the public path, as plain HTTP/1.1)", n)
		}
		for _, h := range a.seen[seenBefore:] {
			if h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" {
				t.Errorf("app saw the upgrade: Upgrade %q, HTTP2-Settings %q", h.Get("Upgrade"), h.Get("Http2-Settings"))
			}
		}
	})

	t.Run("same-site POST with the CSRF proof", func(t *testing.T) {
		r := request(t, "POST", base+"/private", http.Header{"Cookie": {cookie}, "Origin": {fwdAppOrigin}, "X-Csrf-Token": {"c5rf"}})
		wantStatus(t, "POST with the CSRF proof", r, http.StatusOK)
		if got := a.last().Get("X-Auth-User-Id"); got != id.userID {
			t.Errorf("app saw X-Auth-User-Id %q, want %s", got, id.userID)
		}
	})
}
