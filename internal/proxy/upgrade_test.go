package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// tunnellingApp is an app that grants any upgrade it is asked for and then
// reads HTTP/1.1 requests off the switched connection, as an h2c-capable
// server would read frames: whatever it reads there never passed the
// verifier.
type tunnellingApp struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path upgrade=..." of every request it read
}

func newTunnellingApp(t *testing.T) *tunnellingApp {
	a := &tunnellingApp{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.record(r)
		up := r.Header.Get("Upgrade")
		if up == "" {
			fmt.Fprintf(w, "plain %s", r.URL.Path)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", up)
		brw.Flush()
		for {
			req, err := http.ReadRequest(brw.Reader)
			if err != nil {
				return
			}
			a.record(req)
			io.WriteString(brw, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\ntunnel!\n")
			brw.Flush()
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *tunnellingApp) record(r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, fmt.Sprintf("%s %s upgrade=%q http2-settings=%q", r.Method, r.URL.Path, r.Header.Get("Upgrade"), r.Header.Get("Http2-Settings")))
}

func (a *tunnellingApp) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func newTunnelFixture(t *testing.T) (*verifytest.KeySet, *tunnellingApp, string) {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := clientip.New(nil)
	app := newTunnellingApp(t)
	u, _ := url.Parse(app.srv.URL)
	srv := httptest.NewServer(proxy.NewProxy(v, u, nil, proxy.Config{
		Public: proxy.NewPublicPaths([]string{"/public/*"}), TrustedProxies: res, Logger: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(srv.Close)
	return ks, app, strings.TrimPrefix(srv.URL, "http://")
}

// roundTrip writes raw on conn and reads one response.
func roundTrip(t *testing.T, conn net.Conn, br *bufio.Reader, raw string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", strings.SplitN(raw, "\r\n", 2)[0], err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp
}

// TestProxyNeverTunnelsH2C sends an h2c upgrade on a public path and then a
// second request for a private path on the same connection: the upgrade
// must not be granted, and the second request must meet the verifier (401)
// instead of reaching the app through a tunnel.
func TestProxyNeverTunnelsH2C(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers string
	}{
		{"h2c", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"},
		{"h2c without HTTP2-Settings", "Connection: Upgrade\r\nUpgrade: h2c\r\n"},
		{"another protocol", "Connection: Upgrade\r\nUpgrade: TLS/1.0\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, app, addr := newTunnelFixture(t)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(conn)
			first := roundTrip(t, conn, br, "GET /public/index.html HTTP/1.1\r\nHost: x\r\n"+tc.headers+"\r\n")
			if first.StatusCode != http.StatusOK {
				t.Errorf("upgrade on a public path = %d, want 200 answered as plain HTTP/1.1", first.StatusCode)
			}
			second := roundTrip(t, conn, br, "GET /private HTTP/1.1\r\nHost: x\r\n\r\n")
			if second.StatusCode != http.StatusUnauthorized {
				t.Errorf("second request on the connection = %d, want 401 from the verifier", second.StatusCode)
			}
			for _, r := range app.requests() {
				if strings.Contains(r, "/private") {
					t.Errorf("app read %s without a token", r)
				}
				if !strings.HasSuffix(r, `upgrade="" http2-settings=""`) {
					t.Errorf("app saw the upgrade: %s", r)
				}
			}
		})
	}
}

// TestProxyWebSocketNeedsToken checks that a WebSocket upgrade, after which
// the verifier sees nothing, is granted only with a valid token, on public
// paths too.
func TestProxyWebSocketNeedsToken(t *testing.T) {
	ks, app, addr := newTunnelFixture(t)
	for _, tc := range []struct {
		name, path, auth string
		want             int
	}{
		{"public path, no token", "/public/live", "", http.StatusUnauthorized},
		{"private path, no token", "/live", "", http.StatusUnauthorized},
		{"public path, valid token", "/public/live", "Authorization: Bearer " + ks.Token(t, "user-1") + "\r\n", http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(app.requests())
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			resp := roundTrip(t, conn, bufio.NewReader(conn), "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+tc.auth+"\r\n")
			if resp.StatusCode != tc.want {
				t.Errorf("WebSocket upgrade of %s = %d, want %d", tc.path, resp.StatusCode, tc.want)
			}
			if reached := len(app.requests()) > before; reached != (tc.want == http.StatusSwitchingProtocols) {
				t.Errorf("app reached = %v, want %v", reached, !reached)
			}
		})
	}
}

// TestProxyHidesIssuerCookies checks that the refresh and CSRF cookies
// never reach the app, nor an access cookie beside the Authorization header
// that authenticated (nobody checked it: an app reading it took a forged
// one's word), while every other cookie does, unchanged and in order.
func TestProxyHidesIssuerCookies(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.ks.Token(t, "user-1")
	for _, tc := range []struct {
		name    string
		cookies []string
		want    []string // nil: no Cookie header
	}{
		{"mixed", []string{"a=1; __Host-refresh_token=r; b=2; __Host-csrf_token=c; __Host-access_token=x"}, []string{"a=1; b=2"}},
		{"access cookies beside the header", []string{"__Host-access_token=forged", "a=1; __Host-access_token=x"}, []string{"a=1"}},
		{"one smuggled after a space", []string{"a=1 __Host-access_token=forged"}, nil}, // refused, see below
		{"only issuer cookies", []string{"__Host-refresh_token=r; __Host-csrf_token=c"}, nil},
		{"two Cookie headers", []string{"a=1; __Host-refresh_token=r", "b=2"}, []string{"a=1; b=2"}},
		{"look-alikes kept", []string{"__host-refresh_token=1; x__Host-csrf_token=2; v=__Host-refresh_token"}, []string{"__host-refresh_token=1; x__Host-csrf_token=2; v=__Host-refresh_token"}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.hits.Load()
			resp := send(t, "GET", f.proxy.URL+"/x", http.Header{"Authorization": {"Bearer " + tok}, "Cookie": tc.cookies})
			if strings.Contains(tc.name, "smuggled") {
				if resp.StatusCode != http.StatusUnauthorized || f.up.hits.Load() != before {
					t.Fatalf("GET /x with an access cookie smuggled where Go does not parse it = %d, app reached %v; want 401, not reached", resp.StatusCode, f.up.hits.Load() != before)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /x = %d, want 200", resp.StatusCode)
			}
			got := (*f.up.last.Load())["Cookie"]
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("app's Cookie = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("issuer path", func(t *testing.T) {
		ks := verifytest.NewKeySet(t)
		v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience})
		if err != nil {
			t.Fatal(err)
		}
		up := newUpstream(t)
		u, _ := url.Parse(up.srv.URL)
		srv := httptest.NewServer(proxy.NewProxy(v, u, nil, proxy.Config{
			Public: proxy.NewPublicPaths([]string{"/v1/refresh"}), IssuerPaths: proxy.NewPublicPaths([]string{"/v1/*"}), Logger: slog.New(slog.DiscardHandler),
		}))
		t.Cleanup(srv.Close)
		const all = "a=1; __Host-refresh_token=r; __Host-csrf_token=c"
		for _, tc := range []struct{ path, want string }{
			{"/v1/refresh", all},
			{"/v1/../app/x", "a=1"},
			{"/app/x", "a=1"},
		} {
			send(t, "GET", srv.URL+tc.path, http.Header{"Cookie": {all}, "Authorization": {"Bearer " + ks.Token(t, "u")}})
			if got := up.last.Load().Get("Cookie"); got != tc.want {
				t.Errorf("upstream Cookie for %s = %q, want %q", tc.path, got, tc.want)
			}
		}
	})
	t.Run("public path", func(t *testing.T) {
		send(t, "GET", f.proxy.URL+"/public/a.css", http.Header{"Cookie": {"__Host-refresh_token=r; a=1"}})
		if got := (*f.up.last.Load())["Cookie"]; fmt.Sprint(got) != "[a=1]" {
			t.Errorf("app's Cookie on a public path = %q, want [a=1]", got)
		}
	})
}
