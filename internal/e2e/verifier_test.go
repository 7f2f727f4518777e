package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// app is the upstream behind the verifier: it records what reached it.
type app struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	seen []http.Header
}

func newApp(t *testing.T) *app {
	a := &app{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Clone())
		a.mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.Header.Get("X-Auth-User-Id"))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) last() http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return nil
	}
	return a.seen[len(a.seen)-1]
}

// authHeaders lists every header a request reached the app with that an
// identity could hide in.
func authHeaders(h http.Header) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(k, "_", "-")), "x-auth-") {
			out[k] = v
		}
	}
	return out
}

type verifierProc struct {
	*proc
	base, admin string
}

// keySetFile returns a key set that signs for the issuer and audience the
// verifiers here expect, and the path of its JWKS file, for --jwks-file.
func keySetFile(t testing.TB) (*verifytest.KeySet, string) {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	ks.Issuer, ks.Audience = "http://issuer.test", "api"
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, ks.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	return ks, jwks
}

func startVerifier(t testing.TB, args ...string) *verifierProc {
	t.Helper()
	return startVerifierWrapped(t, nil, nil, args...)
}

// startVerifierWrapped is startVerifier with the verifier run by wrap
// (startWrapped) and env added to its environment.
func startVerifierWrapped(t testing.TB, wrap, env []string, args ...string) *verifierProc {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--issuer", "http://issuer.test", "--audience", "api", "--log-level", "debug"}, args...)
	p := startWrapped(t, wrap, "verifier", []string{"proxy", "admin"}, env, args...)
	return &verifierProc{proc: p, base: "http://" + p.addr["proxy"], admin: "http://" + p.addr["admin"]}
}

// waitReady polls /readyz: the verifier says when it has a key set.
func (v *verifierProc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := do(t, "GET", v.admin+"/readyz", nil)
		if r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("verifier not ready: %d %s\n%s", r.status, r.body, v.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestVerifierInFrontOfTheIssuer(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t))
	email := uniqueEmail()
	me := register(t, is, email)
	tok := login(t, is, email, strongPassword, "laptop")
	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-url", is.base+"/.well-known/jwks.json", "--public-path", "/public/*")
	v.waitReady(t)

	t.Run("valid token reaches the app with identity headers", func(t *testing.T) {
		r := do(t, "GET", v.base+"/orders", nil, bearer(tok.Access)...)
		wantStatus(t, "GET /orders", r, http.StatusOK)
		got := authHeaders(a.last())
		want := map[string]string{"X-Auth-User-Id": me["id"].(string), "X-Auth-Role": "user", "X-Auth-Session-Id": tok.SessionID}
		for k, w := range want {
			if g := got[k]; len(g) != 1 || g[0] != w {
				t.Errorf("app saw %s = %q, want %q", k, g, w)
			}
		}
		if len(got["X-Auth-Token-Id"]) != 1 {
			t.Errorf("app saw no X-Auth-Token-Id: %v", got)
		}
	})

	// Rotation runs before any forged kid has been seen: a forged kid
	// spends the verifier's one unknown-kid refetch per 10 s, and this
	// rotation activates the new key after 2 s, faster than the documented
	// procedure (--activate-in longer than the key set's max-age) under
	// which verifiers have the new key before it signs anything.
	t.Run("key rotation under continuous traffic rejects nothing", func(t *testing.T) {
		oldKid := kidOf(t, tok.Access)
		if out, err := is.cli(t, "", "keys", "rotate", "--activate-in", "2s"); err != nil {
			t.Fatalf("keys rotate: %v\n%s", err, out)
		}
		rt := tok.Refresh
		deadline := time.Now().Add(60 * time.Second)
		afterSwitch, total := 0, 0
		for afterSwitch < 20 {
			if time.Now().After(deadline) {
				t.Fatalf("no token signed by a new key within 60s (%d requests)", total)
			}
			r := refresh(t, is, rt)
			wantStatus(t, "refresh", r, http.StatusOK)
			m := r.json(t)
			rt = m["refresh_token"].(string)
			access := m["access_token"].(string)
			if kidOf(t, access) != oldKid {
				afterSwitch++
			}
			total++
			got := do(t, "GET", v.base+"/orders", nil, bearer(access)...)
			wantStatus(t, fmt.Sprintf("request %d (new key: %v)", total, afterSwitch > 0), got, http.StatusOK)
		}
		tok.Refresh = rt
	})

	t.Run("spoofed identity headers never reach the app", func(t *testing.T) {
		for _, path := range []string{"/orders", "/public/x"} {
			req, _ := http.NewRequest("GET", v.base+path, nil)
			req.Header["Authorization"] = []string{"Bearer " + tok.Access}
			for _, name := range []string{"X-Auth-User-Id", "x-auth-role", "X_Auth_User_Id", "X_AUTH_TENANT_ID", "X-AUTH-Organization_Id", "x-auth-anything"} {
				req.Header[name] = []string{"spoofed"}
			}
			wantStatus(t, path, send(t, req), http.StatusOK)
			for k, vals := range authHeaders(a.last()) {
				for _, val := range vals {
					if val == "spoofed" {
						t.Errorf("%s: app saw spoofed %s", path, k)
					}
				}
			}
		}
	})

	t.Run("bad tokens get 401 and never reach the app", func(t *testing.T) {
		foreign := verifytest.NewKeySet(t)
		parts := strings.Split(tok.Access, ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"role":"user"`, `"role":"admin"`, 1))) + "." + parts[2]
		before := a.hits.Load()
		for name, auth := range map[string]string{
			"missing":     "",
			"malformed":   "Bearer abc.def",
			"tampered":    "Bearer " + tampered,
			"foreign key": "Bearer " + foreign.Token(t, me["id"].(string)),
			"not bearer":  "Token " + tok.Access,
		} {
			r := do(t, "GET", v.base+"/orders", nil, "Authorization", auth)
			wantProblem(t, name, r, http.StatusUnauthorized, "invalid_token")
			if wa := r.header.Get("WWW-Authenticate"); !strings.Contains(wa, `Bearer error="invalid_token"`) {
				t.Errorf("%s: WWW-Authenticate = %q", name, wa)
			}
		}
		if n := a.hits.Load() - before; n != 0 {
			t.Errorf("app reached %d times by bad tokens, want 0", n)
		}
		metrics := string(do(t, "GET", v.admin+"/metrics", nil).body)
		for _, series := range []string{
			`verifier_requests_total{outcome="rejected",reason="missing"}`,
			`verifier_requests_total{outcome="rejected",reason="malformed"}`,
			`verifier_requests_total{outcome="rejected",reason="signature"}`,
			`verifier_requests_total{outcome="allowed",reason=""}`,
			`verifier_verification_seconds_count`,
			`verifier_keyset_age_seconds`,
		} {
			if !strings.Contains(metrics, series) {
				t.Errorf("/metrics lacks %s", series)
			}
		}
	})

	t.Run("verifier check", func(t *testing.T) {
		out, err := runVerifier(t, tok.Access, "check", "--jwks-url", is.base+"/.well-known/jwks.json", "--issuer", "http://issuer.test", "--audience", "api")
		if err != nil || !strings.Contains(out, me["id"].(string)) {
			t.Errorf("verifier check (valid) = %q, %v; want the identity", out, err)
		}
		out, err = runVerifier(t, "abc.def.ghi", "check", "--jwks-url", is.base+"/.well-known/jwks.json", "--issuer", "http://issuer.test", "--audience", "api")
		if err == nil || !strings.Contains(out, "malformed") {
			t.Errorf("verifier check (garbage) = %q, %v; want exit 1 with the reason", out, err)
		}
	})

	t.Run("issuer down: valid tokens still verified", func(t *testing.T) {
		fresh := refresh(t, is, tok.Refresh).json(t)["access_token"].(string)
		is.stop(t)
		if _, err := client.Get(is.base + "/health"); err == nil {
			t.Fatal("issuer still answers after SIGTERM")
		}
		for i := range 5 {
			r := do(t, "GET", v.base+"/orders", nil, bearer(fresh)...)
			wantStatus(t, fmt.Sprintf("request %d with the issuer down", i), r, http.StatusOK)
		}
		r := do(t, "GET", v.base+"/orders", nil, bearer(verifytest.NewKeySet(t).Token(t, "x"))...)
		wantProblem(t, "unknown key with the issuer down", r, http.StatusUnauthorized, "invalid_token")
		if r := do(t, "GET", v.admin+"/readyz", nil); r.status != http.StatusOK {
			t.Errorf("readyz with the issuer down = %d, want 200 (the last good key set stays)", r.status)
		}
	})

	t.Run("no token in the verifier's logs", func(t *testing.T) {
		logs := v.logs.String()
		if !strings.Contains(logs, `"msg":"request"`) {
			t.Fatal("no access log lines captured; the check would prove nothing")
		}
		if strings.Contains(logs, tok.Access) || strings.Contains(logs, strings.Split(tok.Access, ".")[2]) {
			t.Error("an access token appears in the verifier's logs")
		}
	})
}

func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Kid string }
	json.Unmarshal(raw, &h)
	return h.Kid
}

func runVerifier(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "verifier"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestVerifierRefusesForgedTokens runs the verifier on a key set file whose
// private key the test holds, so it can sign tokens that are wrong in one
// way each.
func TestVerifierRefusesForgedTokens(t *testing.T) {
	ks, jwks := keySetFile(t)
	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-file", jwks)
	v.waitReady(t)

	now := time.Now()
	claims := func(mod func(c *verifytest.Claims)) verifytest.Claims {
		c := verifytest.Claims{Subject: "user-1", Role: "user", SessionID: "s", TokenID: "j"}
		mod(&c)
		return c
	}
	header := map[string]any{"alg": "RS256", "typ": "JWT", "kid": ks.KeyID()}
	body := map[string]any{"iss": ks.Issuer, "aud": ks.Audience, "sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	hdrJSON := func(h map[string]any) []byte { b, _ := json.Marshal(h); return b }
	bodyJSON, _ := json.Marshal(body)
	pubJSON := ks.JWKS()

	valid := ks.Mint(t, claims(func(*verifytest.Claims) {}))
	wantStatus(t, "control: a valid token", do(t, "GET", v.base+"/x", nil, bearer(valid)...), http.StatusOK)
	before := a.hits.Load()
	for name, tok := range map[string]string{
		"expired":                             ks.Mint(t, claims(func(c *verifytest.Claims) { c.IssuedAt, c.ExpiresAt = now.Add(-2*time.Hour), now.Add(-time.Hour) })),
		"not yet valid":                       ks.Mint(t, claims(func(c *verifytest.Claims) { c.NotBefore = now.Add(time.Hour) })),
		"wrong issuer":                        ks.Mint(t, claims(func(c *verifytest.Claims) { c.Issuer = "http://evil.test" })),
		"wrong audience":                      ks.Mint(t, claims(func(c *verifytest.Claims) { c.Audience = []string{"other"} })),
		"alg none":                            verifytest.Encode(hdrJSON(map[string]any{"alg": "none", "typ": "JWT", "kid": ks.KeyID()}), bodyJSON, nil),
		"HS256 with the public key as secret": verifytest.SignHS256(hdrJSON(map[string]any{"alg": "HS256", "typ": "JWT", "kid": ks.KeyID()}), bodyJSON, pubJSON),
		"crit header":                         ks.SignRaw(t, map[string]any{"alg": "RS256", "typ": "JWT", "kid": ks.KeyID(), "crit": []string{"exp"}}, body),
		"jku header":                          ks.SignRaw(t, map[string]any{"alg": "RS256", "typ": "JWT", "kid": ks.KeyID(), "jku": "http://evil.test/jwks"}, body),
		"signature of another token":          strings.Join(append(strings.Split(valid, ".")[:2], strings.Split(ks.SignRaw(t, header, map[string]any{"sub": "other"}), ".")[2]), "."),
	} {
		r := do(t, "GET", v.base+"/x", nil, bearer(tok)...)
		wantProblem(t, name, r, http.StatusUnauthorized, "invalid_token")
	}
	if n := a.hits.Load() - before; n != 0 {
		t.Errorf("app reached %d times by forged tokens, want 0", n)
	}
}

func TestVerifierForwardAuthMode(t *testing.T) {
	ks, jwks := keySetFile(t)
	v := startVerifier(t, "--mode", "forward-auth", "--forward-auth-headers", "traefik", "--jwks-file", jwks, "--public-path", "/public/*", "--trusted-proxies", "127.0.0.1/32")
	v.waitReady(t)
	r := do(t, "GET", v.base+"/auth", nil, bearer(ks.Token(t, "user-7"))...)
	wantStatus(t, "forward-auth with a valid token", r, http.StatusOK)
	if got := r.header.Get("X-Auth-User-Id"); got != "user-7" {
		t.Errorf("X-Auth-User-Id = %q, want user-7", got)
	}
	wantProblem(t, "forward-auth without a token", do(t, "GET", v.base+"/auth", nil), http.StatusUnauthorized, "invalid_token")
	wantStatus(t, "forward-auth for a public original URI", do(t, "GET", v.base+"/auth", nil, "X-Forwarded-Uri", "/public/app.js"), http.StatusOK)
}

func TestVerifierNotReadyWithoutKeys(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-url", dead.URL+"/jwks.json")
	if r := do(t, "GET", v.admin+"/readyz", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz without a key set = %d, want 503", r.status)
	}
	if r := do(t, "GET", v.admin+"/healthz", nil); r.status != http.StatusOK {
		t.Errorf("healthz = %d, want 200 (alive, just not ready)", r.status)
	}
	ks := verifytest.NewKeySet(t)
	wantProblem(t, "request without a key set", do(t, "GET", v.base+"/x", nil, bearer(ks.Token(t, "u"))...), http.StatusUnauthorized, "invalid_token")
	if n := a.hits.Load(); n != 0 {
		t.Errorf("app reached %d times without a key set, want 0 (never fail open)", n)
	}
}

// TestVerifierIssuerPath puts the issuer behind the verifier, as the
// browser demo does: a refresh by cookie through the verifier works only
// where --issuer-path lets the refresh and CSRF cookies through; elsewhere
// the upstream never receives them.
func TestVerifierIssuerPath(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--browser-origins", browserOrigin)
	email := uniqueEmail()
	register(t, is, email)
	for _, tc := range []struct {
		name      string
		extra     []string
		refreshed bool
	}{
		{"with --issuer-path", []string{"--issuer-path", "/v1/*"}, true},
		{"without", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := startVerifier(t, append([]string{"--upstream", is.base, "--jwks-url", is.base + "/.well-known/jwks.json",
				"--browser-origins", browserOrigin, "--public-path", "/v1/login", "--public-path", "/v1/refresh"}, tc.extra...)...)
			v.waitReady(t)
			jar := cookieJar{}
			r := browserDo(t, "POST", v.base+"/v1/login", map[string]string{"email": email, "password": strongPassword, "device_id": "browser-" + tc.name}, jar, browserOrigin, "")
			wantStatus(t, "browser login through the verifier", r, http.StatusOK)
			jar.take(t, "browser login", r)
			csrf, _ := r.json(t)["csrf_token"].(string)
			r = browserDo(t, "POST", v.base+"/v1/refresh", nil, jar, browserOrigin, csrf)
			// Without the cookies the issuer sees a refresh with no token
			// (a 4xx); with them, the browser's refresh.
			if refreshed := r.status == http.StatusOK; refreshed != tc.refreshed {
				t.Fatalf("refresh by cookie through the verifier = %d %s, want refreshed %v", r.status, r.body, tc.refreshed)
			}
		})
	}
}
