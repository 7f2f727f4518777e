package proxy_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

const browserOrigin = "https://app.example.com"

// forwardAuthServer runs forward-auth with contract, the caller (loopback)
// trusted unless trusted is false, /public/* public and browser cookies on.
func forwardAuthServer(t *testing.T, ks *verifytest.KeySet, contract proxy.ForwardHeaders, trusted bool) *httptest.Server {
	t.Helper()
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience})
	if err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	if trusted {
		cidrs = []string{"127.0.0.1/32"}
	}
	res, err := clientip.New(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy.NewForwardAuth(v, proxy.Config{
		Public: proxy.NewPublicPaths([]string{"/public/*"}), TrustedProxies: res, Logger: slog.New(slog.DiscardHandler),
		Cookies: &verify.CookieAuth{Origins: []string{browserOrigin}}, ForwardHeaders: contract,
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send makes one request with h sent exactly as given (repeated and
// non-canonical names included).
func send(t *testing.T, method, url string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestForwardAuthHeaderContract checks that the original URI and method
// come only from the headers the configured proxy sets, and that a request
// whose forms disagree or repeat is refused: nginx and Traefik pass the
// client's own X-Forwarded-*/X-Original-* headers on to the verifier.
func TestForwardAuthHeaderContract(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	tok := "Bearer " + ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "member"})
	servers := map[proxy.ForwardHeaders]*httptest.Server{}
	for _, c := range []proxy.ForwardHeaders{proxy.ForwardHeadersNginx, proxy.ForwardHeadersTraefik, proxy.ForwardHeadersCaddy, proxy.ForwardHeadersEnvoy} {
		servers[c] = forwardAuthServer(t, ks, c, true)
	}
	untrustedNginx := forwardAuthServer(t, ks, proxy.ForwardHeadersNginx, false)
	for _, tc := range []struct {
		name     string
		srv      *httptest.Server
		method   string
		path     string
		hdr      http.Header
		status   int
		identity string
	}{
		// nginx: X-Original-URI and X-Original-Method, set by proxy_set_header.
		{"nginx: public X-Original-URI", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css"}}, 200, ""},
		{"nginx: private X-Original-URI, no token", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/admin"}}, 401, ""},
		// A "#" in the URI: the app behind resolves what follows it.
		{"nginx: public X-Original-URI with a fragment", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css#/../../admin"}}, 401, ""},
		{"nginx: public X-Original-URI with a fragment after a query", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css?x#/../../admin"}}, 200, ""},
		{"traefik: public X-Forwarded-Uri with a fragment", servers["traefik"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/public/a.css#/../../admin"}}, 401, ""},
		{"nginx: client's X-Forwarded-Uri disagrees", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/admin"}, "X-Forwarded-Uri": {"/public/a.css"}}, 401, ""},
		{"nginx: client's X-Forwarded-Uri alone is not believed", servers["nginx"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/public/a.css"}}, 401, ""},
		{"nginx: agreeing forms", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css"}, "X-Forwarded-Uri": {"/public/a.css"}}, 200, ""},
		{"nginx: repeated X-Original-URI", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css", "/public/b.css"}}, 401, ""},
		{"nginx: method forms disagree", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/x"}, "X-Original-Method": {"POST"}, "X-Forwarded-Method": {"GET"}, "Authorization": {tok}}, 401, ""},
		{"nginx: untrusted peer's X-Original-URI ignored", untrustedNginx, "GET", "/public/a.css", http.Header{"X-Original-Uri": {"/public/a.css"}}, 401, ""},
		{"nginx: valid token", servers["nginx"], "GET", "/", http.Header{"X-Original-Uri": {"/admin"}, "X-Original-Method": {"DELETE"}, "Authorization": {tok}}, 200, "user-1"},
		// Traefik and Caddy: X-Forwarded-Uri and X-Forwarded-Method.
		{"traefik: public X-Forwarded-Uri", servers["traefik"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/public/a.css?v=1"}, "X-Forwarded-Method": {"GET"}}, 200, ""},
		{"traefik: client's X-Original-URI disagrees", servers["traefik"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/admin"}, "X-Original-Uri": {"/public/a.css"}}, 401, ""},
		{"traefik: client's X-Original-URI alone is not believed", servers["traefik"], "GET", "/", http.Header{"X-Original-Uri": {"/public/a.css"}}, 401, ""},
		{"traefik: repeated X-Forwarded-Method", servers["traefik"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/x"}, "X-Forwarded-Method": {"POST", "GET"}, "Authorization": {tok}}, 401, ""},
		{"caddy: public X-Forwarded-Uri", servers["caddy"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/public/a.css"}, "X-Forwarded-Method": {"GET"}}, 200, ""},
		{"caddy: client's X-Original-URI disagrees", servers["caddy"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/admin"}, "X-Original-Uri": {"/public/a.css"}}, 401, ""},
		{"caddy: valid token", servers["caddy"], "GET", "/", http.Header{"X-Forwarded-Uri": {"/admin"}, "X-Forwarded-Method": {"POST"}, "Authorization": {tok}}, 200, "user-1"},
		// Envoy: the check request carries the original method and path.
		{"envoy: public request path", servers["envoy"], "GET", "/public/a.css", nil, 200, ""},
		{"envoy: client's X-Forwarded-Uri disagrees with the path", servers["envoy"], "GET", "/admin", http.Header{"X-Forwarded-Uri": {"/public/a.css"}}, 401, ""},
		{"envoy: client's X-Original-URI disagrees with the path", servers["envoy"], "GET", "/admin", http.Header{"X-Original-Uri": {"/public/a.css"}}, 401, ""},
		{"envoy: client's X-Forwarded-Method disagrees", servers["envoy"], "POST", "/admin", http.Header{"X-Forwarded-Method": {"GET"}, "Authorization": {tok}}, 401, ""},
		{"envoy: valid token", servers["envoy"], "POST", "/admin", http.Header{"Authorization": {tok}}, 200, "user-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, tc.method, tc.srv.URL+tc.path, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("forward-auth %s %s %v = %d, want %d", tc.method, tc.path, tc.hdr, resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get(proxy.HeaderUserID); got != tc.identity {
				t.Errorf("X-Auth-User-Id = %q, want %q", got, tc.identity)
			}
			if tc.status == 401 {
				var p struct{ Code string }
				json.NewDecoder(resp.Body).Decode(&p)
				if p.Code != "invalid_token" || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("401 = code %q, WWW-Authenticate %q; want invalid_token with the header", p.Code, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
}

// TestForwardAuthCSRFUnknownMethod checks that a cookie-authenticated
// request whose original method the proxy did not tell counts as unsafe:
// nginx's sub-request is always a GET.
func TestForwardAuthCSRFUnknownMethod(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	cookie := verify.DefaultAccessCookie + "=" + ks.Token(t, "user-1")
	nginx := forwardAuthServer(t, ks, proxy.ForwardHeadersNginx, true)
	untrusted := forwardAuthServer(t, ks, proxy.ForwardHeadersTraefik, false)
	envoy := forwardAuthServer(t, ks, proxy.ForwardHeadersEnvoy, true)
	withCSRF := http.Header{"Origin": {browserOrigin}, "X-Csrf-Token": {"c"}, "Cookie": {cookie + "; " + verify.DefaultCSRFCookie + "=c"}}
	merge := func(a, b http.Header) http.Header {
		out := a.Clone()
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		method string
		hdr    http.Header
		status int
	}{
		{"nginx: no X-Original-Method", nginx, "GET", http.Header{"X-Original-Uri": {"/x"}, "Cookie": {cookie}}, 403},
		{"nginx: X-Original-Method GET", nginx, "GET", http.Header{"X-Original-Uri": {"/x"}, "X-Original-Method": {"GET"}, "Cookie": {cookie}}, 200},
		{"nginx: X-Original-Method POST", nginx, "GET", http.Header{"X-Original-Uri": {"/x"}, "X-Original-Method": {"POST"}, "Cookie": {cookie}}, 403},
		{"nginx: unknown method with the CSRF proof", nginx, "GET", merge(withCSRF, http.Header{"X-Original-Uri": {"/x"}}), 200},
		{"untrusted peer's X-Forwarded-Method GET", untrusted, "GET", http.Header{"X-Forwarded-Method": {"GET"}, "Cookie": {cookie}}, 403},
		{"envoy: POST", envoy, "POST", http.Header{"Cookie": {cookie}}, 403},
		{"envoy: GET", envoy, "GET", http.Header{"Cookie": {cookie}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, tc.method, tc.srv.URL+"/", tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("forward-auth %s %v = %d, want %d", tc.method, tc.hdr, resp.StatusCode, tc.status)
			}
			if tc.status == 403 {
				var p struct{ Code string }
				json.NewDecoder(resp.Body).Decode(&p)
				if p.Code != "csrf_failed" {
					t.Errorf("403 code = %q, want csrf_failed", p.Code)
				}
			}
		})
	}
}

// TestForwardAuthAnswersEveryIdentityHeader checks that all six identity
// headers are in every 200, empty for what the token lacks and on public
// paths, so a proxy copying them overwrites what the client sent.
func TestForwardAuthAnswersEveryIdentityHeader(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	srv := forwardAuthServer(t, ks, proxy.ForwardHeadersEnvoy, true)
	all := []string{proxy.HeaderUserID, proxy.HeaderRole, proxy.HeaderTenantID, proxy.HeaderOrganizationID, proxy.HeaderSessionID, proxy.HeaderTokenID}
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "member", SessionID: "s-1", TokenID: "j-1"})
	for _, tc := range []struct {
		name string
		path string
		hdr  http.Header
		want map[string]string
	}{
		{"token without tenant and organization", "/x", http.Header{"Authorization": {"Bearer " + tok}}, map[string]string{
			proxy.HeaderUserID: "user-1", proxy.HeaderRole: "member", proxy.HeaderSessionID: "s-1", proxy.HeaderTokenID: "j-1",
		}},
		{"public path", "/public/a.css", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, "GET", srv.URL+tc.path, tc.hdr)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d, want 200", tc.path, resp.StatusCode)
			}
			for _, name := range all {
				got, present := resp.Header[name]
				if !present || len(got) != 1 || got[0] != tc.want[name] {
					t.Errorf("answer header %s = %q (present %v), want exactly [%q]", name, got, present, tc.want[name])
				}
			}
		})
	}
}

// TestForwardAuthUpgrades checks the upgrade rule on what forward-auth
// sees (Caddy passes the client's Upgrade header on): h2c is refused
// everywhere, and a WebSocket upgrade needs a token on a public path too.
func TestForwardAuthUpgrades(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	srv := forwardAuthServer(t, ks, proxy.ForwardHeadersCaddy, true)
	tok := "Bearer " + ks.Token(t, "user-1")
	for _, tc := range []struct {
		name   string
		hdr    http.Header
		status int
	}{
		{"public path", http.Header{}, 200},
		{"h2c on a public path", http.Header{"Upgrade": {"h2c"}}, 401},
		{"HTTP2-Settings on a public path", http.Header{"Http2-Settings": {"AAMAAABkAAQCAAAAAAIAAAAA"}}, 401},
		{"h2c with a token", http.Header{"Upgrade": {"h2c"}, "Authorization": {tok}}, 401},
		{"websocket on a public path, no token", http.Header{"Upgrade": {"websocket"}}, 401},
		{"websocket on a public path, with a token", http.Header{"Upgrade": {"websocket"}, "Authorization": {tok}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.hdr["X-Forwarded-Uri"] = []string{"/public/live"}
			if resp := send(t, "GET", srv.URL+"/", tc.hdr); resp.StatusCode != tc.status {
				t.Errorf("forward-auth %v = %d, want %d", tc.hdr, resp.StatusCode, tc.status)
			}
		})
	}
}

// TestForwardAuthAppCookies checks that the 200 answer hands the proxy the
// request's cookies without the issuer's refresh and CSRF cookies, and
// without an access cookie when the Authorization header authenticated, in
// every form a proxy can copy onto the app's request.
func TestForwardAuthAppCookies(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "member"})
	srv := forwardAuthServer(t, ks, proxy.ForwardHeadersEnvoy, true)
	access := verify.DefaultAccessCookie + "=" + tok
	secrets := verify.DefaultRefreshCookie + "=r3fresh; " + verify.DefaultCSRFCookie + "=c5rf"
	for _, tc := range []struct {
		name   string
		path   string
		hdr    http.Header
		want   string // the app's Cookie header; "" for none
		remove bool   // Envoy is told to delete the client's Cookie
	}{
		{"access, refresh, CSRF and another cookie", "/x",
			http.Header{"Cookie": {"theme=dark; " + secrets + "; " + access}}, "theme=dark; " + access, false},
		{"only the hidden cookies, bearer token", "/x",
			http.Header{"Cookie": {secrets}, "Authorization": {"Bearer " + tok}}, "", true},
		{"bearer token and an access cookie nobody checked", "/x",
			http.Header{"Cookie": {"theme=dark; " + verify.DefaultAccessCookie + "=forged"}, "Authorization": {"Bearer " + tok}}, "theme=dark", false},
		{"two Cookie lines", "/x",
			http.Header{"Cookie": {access + "; " + verify.DefaultRefreshCookie + "=r3fresh", "a=1; " + verify.DefaultCSRFCookie + "=c5rf"}}, access + "; a=1", false},
		{"two Cookie lines, none hidden", "/x",
			http.Header{"Cookie": {access + "; a=1", "b=2"}}, access + "; a=1; b=2", false},
		{"public path", "/public/a.css", http.Header{"Cookie": {secrets + "; a=1"}}, "a=1", false},
		{"no cookie", "/public/a.css", nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, "GET", srv.URL+tc.path, tc.hdr)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("forward-auth GET %s = %d, want 200", tc.path, resp.StatusCode)
			}
			if got, ok := resp.Header[proxy.HeaderAppCookie]; !ok || len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s = %q (present %t), want [%q]", proxy.HeaderAppCookie, got, ok, tc.want)
			}
			got := resp.Header.Values("Cookie")
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("Cookie = %q, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("Cookie = %q, want [%q]", got, tc.want)
			}
			if got, want := resp.Header.Get("X-Envoy-Auth-Headers-To-Remove"), map[bool]string{true: "cookie"}[tc.remove]; got != want {
				t.Errorf("X-Envoy-Auth-Headers-To-Remove = %q, want %q", got, want)
			}
		})
	}
}

// TestForwardAuthCookieCopies: the app's cookies come back once for the
// proxies that copy X-Auth-Cookie (nginx, Caddy) and also as Cookie for
// those that cannot rename a header (Traefik, Envoy). Twice, a 1.9 KB jar
// took the answer past nginx's default 4 KiB buffer: every request 500.
func TestForwardAuthCookieCopies(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	tok := ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "member"})
	for contract, wantCookie := range map[proxy.ForwardHeaders]bool{
		proxy.ForwardHeadersNginx: false, proxy.ForwardHeadersCaddy: false,
		proxy.ForwardHeadersTraefik: true, proxy.ForwardHeadersEnvoy: true,
	} {
		srv := forwardAuthServer(t, ks, contract, true)
		resp := send(t, "GET", srv.URL+"/x", http.Header{"Authorization": {"Bearer " + tok}, "Cookie": {"a=1"}})
		if resp.StatusCode != http.StatusOK || resp.Header.Get(proxy.HeaderAppCookie) != "a=1" {
			t.Errorf("%s: %d, %s %q; want 200 and a=1", contract, resp.StatusCode, proxy.HeaderAppCookie, resp.Header.Get(proxy.HeaderAppCookie))
		}
		if got := resp.Header.Values("Cookie"); wantCookie != (len(got) == 1 && got[0] == "a=1") || !wantCookie && len(got) != 0 {
			t.Errorf("%s: Cookie = %q, want it only for the proxies that cannot rename a header (%t)", contract, got, wantCookie)
		}
	}
}
