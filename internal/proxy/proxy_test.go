package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func TestIsAuthHeaderStripping(t *testing.T) {
	for _, tc := range []struct {
		name  string
		strip bool
	}{
		{"X-Auth-User-Id", true},
		{"x-auth-role", true},
		{"X_Auth_User_Id", true},
		{"X_AUTH_TENANT_ID", true},
		{"x-Auth_Session-id", true},
		{"X-Auth-", true},
		{"X-Auth", false},
		{"X-Authorization", false},
		{"Authorization", false},
		{"X-Authx-User", false},
		{"Xx-Auth-User-Id", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{tc.name: {"v"}}
			proxy.StripAuthHeaders(h)
			if _, left := h[tc.name]; left == tc.strip {
				t.Errorf("StripAuthHeaders(%q) kept = %v, want %v", tc.name, left, !tc.strip)
			}
		})
	}
}

func TestPublicPathsMatch(t *testing.T) {
	p := proxy.NewPublicPaths([]string{"/healthz", "/public/*", "/docs"})
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/healthz", true},
		{"/healthz/", false},
		{"/healthzx", false},
		{"/docs", true},
		{"/public/", true},
		{"/public/a/b.css", true},
		{"/public", false},
		{"/public/../admin", false},
		{"/public/./a", false},
		{"//public/a", false},
		{"/public//a", false},
		{"/public/%2e%2e/admin", false},
		{"/public/a%2Fb", false},
		{"/public\\..\\admin", false},
		{"/public/..;/admin", false},
		{"/public/..;a=b/admin", false},
		{"/public/.;/a", false},
		{"/public/a.css;jsessionid=1", false},
		{"/admin", false},
		{"", false},
	} {
		if got := p.Match(tc.path); got != tc.want {
			t.Errorf("Match(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// upstream records what reached the app.
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
	last atomic.Pointer[http.Header]
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h := r.Header.Clone()
		u.last.Store(&h)
		if r.Header.Get("Upgrade") == "websocket" {
			echoUpgrade(w, r)
			return
		}
		fmt.Fprintf(w, "app saw %s %s", r.Method, r.URL.RequestURI())
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// echoUpgrade switches protocols and echoes one line back, enough to prove
// that an upgraded connection is tunnelled both ways.
func echoUpgrade(w http.ResponseWriter, _ *http.Request) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	line, err := brw.ReadString('\n')
	if err != nil {
		return
	}
	brw.WriteString("echo: " + line)
	brw.Flush()
}

type fixture struct {
	ks    *verifytest.KeySet
	up    *upstream
	proxy *httptest.Server
}

func newFixture(t *testing.T, trusted []string) *fixture {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Algorithms: []string{"RS256"}, ClockSkew: 30 * time.Second})
	if err != nil {
		t.Fatalf("verify.New: %v", err)
	}
	res, err := clientip.New(trusted)
	if err != nil {
		t.Fatalf("clientip.New: %v", err)
	}
	up := newUpstream(t)
	u, _ := url.Parse(up.srv.URL)
	p := proxy.NewProxy(v, u, nil, proxy.Config{
		Public: proxy.NewPublicPaths([]string{"/public/*"}), TrustedProxies: res, Logger: slog.New(slog.DiscardHandler),
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &fixture{ks: ks, up: up, proxy: srv}
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		// Set the map directly so non-canonical spellings go out as written.
		req.Header[k] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var spoofed = map[string]string{
	"X-Auth-User-Id": "evil", "x-auth-role": "admin", "X_Auth_User_Id": "evil", "X_AUTH_TENANT_ID": "t-evil",
}

func TestProxyForwardsValidTokenWithIdentity(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "member", SessionID: "s-1", TokenID: "j-1", TenantID: "t-1"})
	hdr := map[string]string{"Authorization": "Bearer " + tok}
	for k, v := range spoofed {
		hdr[k] = v
	}
	resp := get(t, f.proxy.URL+"/orders?x=1", hdr)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "app saw GET /orders?x=1" {
		t.Fatalf("GET /orders = %d %q, want 200 from the app", resp.StatusCode, body)
	}
	got := *f.up.last.Load()
	want := map[string]string{
		"X-Auth-User-Id": "user-1", "X-Auth-Role": "member", "X-Auth-Session-Id": "s-1",
		"X-Auth-Token-Id": "j-1", "X-Auth-Tenant-Id": "t-1",
	}
	var auth []string
	for name, vals := range got {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-auth-") {
			auth = append(auth, name)
			if w, ok := want[name]; !ok || len(vals) != 1 || vals[0] != w {
				t.Errorf("upstream header %s = %q, want %q", name, vals, want[name])
			}
		}
	}
	if len(auth) != len(want) {
		t.Errorf("upstream x-auth headers = %v, want exactly %v", auth, want)
	}
	if got.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the peer 127.0.0.1", got.Get("X-Forwarded-For"))
	}
}

func TestProxyRejectsWithoutReachingTheApp(t *testing.T) {
	f := newFixture(t, nil)
	other := verifytest.NewKeySet(t)
	expired := f.ks.Mint(t, verifytest.Claims{Subject: "u", ExpiresAt: time.Now().Add(-time.Hour), IssuedAt: time.Now().Add(-2 * time.Hour)})
	for _, tc := range []struct {
		name string
		auth string
	}{
		{"missing", ""},
		{"not bearer", "Basic dXNlcjpwYXNz"},
		{"garbage", "Bearer not.a.token"},
		{"foreign key", "Bearer " + other.Token(t, "u")},
		{"expired", "Bearer " + expired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"X-Auth-User-Id": "evil"}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			resp := get(t, f.proxy.URL+"/orders", hdr)
			var p struct {
				Status int    `json:"status"`
				Code   string `json:"code"`
			}
			json.NewDecoder(resp.Body).Decode(&p)
			if resp.StatusCode != 401 || p.Code != "invalid_token" || p.Status != 401 {
				t.Errorf("GET /orders = %d %+v, want 401 invalid_token", resp.StatusCode, p)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			if wa := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(wa, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want Bearer ...", wa)
			}
		})
	}
	if n := f.up.hits.Load(); n != 0 {
		t.Errorf("upstream hits = %d, want 0", n)
	}
}

func TestProxyPublicPathStripsSpoofedHeaders(t *testing.T) {
	f := newFixture(t, nil)
	resp := get(t, f.proxy.URL+"/public/app.css", spoofed)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /public/app.css = %d, want 200", resp.StatusCode)
	}
	for name := range *f.up.last.Load() {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-auth-") {
			t.Errorf("upstream got %s on a public path", name)
		}
	}
	for _, path := range []string{"/public/../orders", "/public/..;/orders"} {
		if resp := get(t, f.proxy.URL+path, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s = %d, want 401", path, resp.StatusCode)
		}
	}
}

func TestProxyForwardedFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		want    string
	}{
		{"untrusted peer: client's chain dropped", nil, "127.0.0.1"},
		{"trusted peer: chain kept", []string{"127.0.0.0/8"}, "203.0.113.9, 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.trusted)
			get(t, f.proxy.URL+"/x", map[string]string{"Authorization": "Bearer " + f.ks.Token(t, "u"), "X-Forwarded-For": "203.0.113.9"})
			if got := f.up.last.Load().Get("X-Forwarded-For"); got != tc.want {
				t.Errorf("X-Forwarded-For = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestProxyPathOverrides checks that headers an app may route by in place
// of the request line reach it only from a trusted proxy: from anyone else
// "/public/a.css" with "X-Original-URL: /admin" would be the app's /admin.
// So do the spellings of the forwarding headers the proxy does not set
// itself, X-Real-IP, which apps take for the client's address, and the
// other scheme, port, host and address headers frameworks believe.
func TestProxyPathOverrides(t *testing.T) {
	overrides := map[string]string{
		"X-Original-URL": "/admin", "X_Rewrite_URL": "/admin", "x-forwarded-prefix": "/admin",
		"X-Forwarded-Uri": "/admin", "X-Original-Uri": "/admin", "X-Forwarded-Path": "/admin",
		"X-Script-Name": "/public", "X-Original-Path": "/admin", "x-envoy-original-path": "/admin",
		"X_Forwarded_For": "6.6.6.6", "X_Forwarded_Host": "admin.internal", "x_forwarded_proto": "https",
		"X-Real-Ip": "6.6.6.6", "x_real_ip": "6.6.6.6",
		"X-Forwarded-Ssl": "on", "X-Forwarded-Scheme": "https", "X-Forwarded-Port": "443",
		"X-Forwarded-Server": "admin.internal", "X-Original-Host": "admin.internal",
		"True-Client-Ip": "6.6.6.6", "X-Client-Ip": "6.6.6.6", "X-Cluster-Client-Ip": "6.6.6.6",
	}
	for _, tc := range []struct {
		name    string
		trusted []string
		kept    bool
	}{
		{"untrusted peer: dropped", nil, false},
		{"trusted peer: kept", []string{"127.0.0.0/8"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.trusted)
			withToken := maps.Clone(overrides)
			withToken["Authorization"] = "Bearer " + f.ks.Token(t, "u")
			for path, hdr := range map[string]map[string]string{"/public/a.css": overrides, "/orders": withToken} {
				if resp := get(t, f.proxy.URL+path, hdr); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s = %d, want 200", path, resp.StatusCode)
				}
				got := *f.up.last.Load()
				for name := range overrides {
					if _, ok := got[http.CanonicalHeaderKey(name)]; ok != tc.kept {
						t.Errorf("GET %s: app got %s = %t, want %t", path, name, ok, tc.kept)
					}
				}
			}
		})
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	f := newFixture(t, nil)
	f.up.srv.Close()
	resp := get(t, f.proxy.URL+"/x", map[string]string{"Authorization": "Bearer " + f.ks.Token(t, "u")})
	var p struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&p)
	if resp.StatusCode != http.StatusBadGateway || p.Code != "bad_gateway" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET with upstream down = %d %q %q, want 502 bad_gateway problem+json", resp.StatusCode, p.Code, resp.Header.Get("Content-Type"))
	}
}

func TestProxyWebSocketUpgrade(t *testing.T) {
	f := newFixture(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.proxy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", f.ks.Token(t, "u"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade status = %d, want 101", resp.StatusCode)
	}
	fmt.Fprintf(conn, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: hello\n" {
		t.Fatalf("tunnel read = %q, %v; want the echo", line, err)
	}
}

func TestForwardAuth(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience})
	if err != nil {
		t.Fatal(err)
	}
	newServer := func(trusted []string, contract proxy.ForwardHeaders) *httptest.Server {
		res, _ := clientip.New(trusted)
		srv := httptest.NewServer(proxy.NewForwardAuth(v, proxy.Config{
			Public: proxy.NewPublicPaths([]string{"/public/*"}), TrustedProxies: res, Logger: slog.New(slog.DiscardHandler),
			ForwardHeaders: contract,
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	loopback := []string{"127.0.0.1/32"}
	envoy := newServer(nil, proxy.ForwardHeadersEnvoy)
	traefik, nginx := newServer(loopback, proxy.ForwardHeadersTraefik), newServer(loopback, proxy.ForwardHeadersNginx)
	untrustedTraefik := newServer(nil, proxy.ForwardHeadersTraefik)
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "admin", SessionID: "s-1"})
	for _, tc := range []struct {
		name     string
		srv      *httptest.Server
		path     string
		hdr      map[string]string
		status   int
		identity string
	}{
		{"valid token", envoy, "/auth", map[string]string{"Authorization": "Bearer " + tok}, 200, "user-1"},
		{"no token", envoy, "/auth", nil, 401, ""},
		{"spoofed identity, no token", envoy, "/auth", spoofed, 401, ""},
		{"envoy: original path is the request path", envoy, "/public/a.css", nil, 200, ""},
		{"traefik: trusted X-Forwarded-Uri public", traefik, "/auth", map[string]string{"X-Forwarded-Uri": "/public/a.css?v=1"}, 200, ""},
		{"nginx: trusted X-Original-URI public", nginx, "/auth", map[string]string{"X-Original-URI": "/public/a.css"}, 200, ""},
		{"untrusted X-Forwarded-Uri ignored", untrustedTraefik, "/auth", map[string]string{"X-Forwarded-Uri": "/public/a.css"}, 401, ""},
		{"trusted but traversal", traefik, "/auth", map[string]string{"X-Forwarded-Uri": "/public/../admin"}, 401, ""},
		{"trusted but traversal through a path parameter", nginx, "/auth", map[string]string{"X-Original-URI": "/public/..;/admin"}, 401, ""},
		{"trusted private uri needs token", traefik, "/auth", map[string]string{"X-Forwarded-Uri": "/admin", "Authorization": "Bearer " + tok}, 200, "user-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, tc.srv.URL+tc.path, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("forward-auth %s = %d, want %d", tc.name, resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get(proxy.HeaderUserID); got != tc.identity {
				t.Errorf("X-Auth-User-Id = %q, want %q", got, tc.identity)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if tc.identity != "" && resp.Header.Get(proxy.HeaderRole) != "admin" {
				t.Errorf("X-Auth-Role = %q, want admin", resp.Header.Get(proxy.HeaderRole))
			}
		})
	}
}
