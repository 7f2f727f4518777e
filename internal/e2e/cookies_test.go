package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/pkg/verify"
)

const browserOrigin = "http://app.test"

// cookieJar keeps the cookies an answer set, as a browser would (a Go
// cookie jar would not send Secure cookies over plain http).
type cookieJar map[string]*http.Cookie

func (j cookieJar) take(t *testing.T, what string, r response) {
	t.Helper()
	for _, line := range r.header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			t.Fatalf("%s: Set-Cookie %q: %v", what, line, err)
		}
		if c.MaxAge < 0 {
			delete(j, c.Name)
			continue
		}
		j[c.Name] = c
	}
}

func (j cookieJar) header() string {
	var parts []string
	for _, c := range j {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}

// browserDo sends a request as the browser app would: Origin, cookies and,
// when csrf is not "", the CSRF header.
func browserDo(t *testing.T, method, url string, body any, jar cookieJar, origin, csrf string) response {
	t.Helper()
	headers := []string{"Origin", origin, "Cookie", jar.header()}
	if csrf != "" {
		headers = append(headers, "X-CSRF-Token", csrf)
	}
	return do(t, method, url, body, headers...)
}

func TestBrowserCookies(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--browser-origins", browserOrigin)
	email := uniqueEmail()
	register(t, is, email)

	// Clients without a browser origin keep the JSON flow.
	r := do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword})
	wantStatus(t, "login without Origin", r, http.StatusOK)
	if m := r.json(t); m["access_token"] == nil || m["refresh_token"] == nil || len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("login without Origin: body %s, Set-Cookie %q; want tokens in the body and no cookies", r.body, r.header.Values("Set-Cookie"))
	}
	r = do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword}, "Origin", "http://evil.test")
	if m := r.json(t); m["access_token"] == nil || len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("login from an origin not configured: body %s; want the JSON flow", r.body)
	}

	jar := cookieJar{}
	r = browserDo(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword, "device_id": "browser"}, jar, browserOrigin, "")
	wantStatus(t, "browser login", r, http.StatusOK)
	jar.take(t, "browser login", r)
	m := r.json(t)
	csrf, _ := m["csrf_token"].(string)
	if m["access_token"] != nil || m["refresh_token"] != nil || len(csrf) != 43 || m["expires_in"] == nil {
		t.Fatalf("browser login body = %s; want no tokens, a csrf_token and expires_in", r.body)
	}
	for _, name := range []string{"__Host-access_token", "__Host-refresh_token", "__Host-csrf_token"} {
		c := jar[name]
		if c == nil {
			t.Fatalf("browser login set no %s cookie; got %q", name, r.header.Values("Set-Cookie"))
		}
		if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" || c.MaxAge <= 0 {
			t.Errorf("cookie %s = %+v; want HttpOnly, Secure, SameSite=Lax, Path=/, host-only, a lifetime", name, c)
		}
	}
	if jar["__Host-csrf_token"].Value != csrf {
		t.Errorf("CSRF cookie and body disagree")
	}

	// Safe requests need only the cookie.
	r = browserDo(t, "GET", is.base+"/v1/me", nil, jar, browserOrigin, "")
	wantStatus(t, "GET /v1/me with the access cookie", r, http.StatusOK)
	if r.json(t)["email"] != strings.ToLower(email) && r.json(t)["email"] != email {
		t.Errorf("/v1/me = %s", r.body)
	}

	// Unsafe requests authenticated by the cookie need the origin and the CSRF header.
	refused := []struct {
		name, origin, csrf string
	}{
		{"no CSRF header", browserOrigin, ""},
		{"wrong CSRF header", browserOrigin, strings.Repeat("x", 43)},
		{"foreign origin", "http://evil.test", csrf},
		{"no origin", "", csrf},
	}
	for _, tt := range refused {
		wantProblem(t, "logout/all, "+tt.name, browserDo(t, "POST", is.base+"/v1/logout/all", nil, jar, tt.origin, tt.csrf), http.StatusForbidden, "csrf_failed")
		wantProblem(t, "refresh by cookie, "+tt.name, browserDo(t, "POST", is.base+"/v1/refresh", nil, jar, tt.origin, tt.csrf), http.StatusForbidden, "csrf_failed")
	}

	// Refresh by cookie: new cookies, same CSRF token, the old refresh cookie is spent.
	old := jar["__Host-refresh_token"].Value
	r = browserDo(t, "POST", is.base+"/v1/refresh", nil, jar, browserOrigin, csrf)
	wantStatus(t, "refresh by cookie", r, http.StatusOK)
	jar.take(t, "refresh by cookie", r)
	if jar["__Host-refresh_token"].Value == old || r.json(t)["csrf_token"] != csrf || r.json(t)["access_token"] != nil {
		t.Errorf("refresh by cookie: body %s; want a rotated refresh cookie, the same CSRF token, no tokens in the body", r.body)
	}
	wantProblem(t, "the spent refresh token", refresh(t, is, old), http.StatusUnauthorized, "refresh_token_revoked")

	// Logout by cookie clears the cookies.
	jar = cookieJar{}
	r = browserDo(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword, "device_id": "browser"}, jar, browserOrigin, "")
	jar.take(t, "second browser login", r)
	csrf = r.json(t)["csrf_token"].(string)
	rt := jar["__Host-refresh_token"].Value
	r = browserDo(t, "POST", is.base+"/v1/logout", nil, jar, browserOrigin, csrf)
	wantStatus(t, "logout by cookie", r, http.StatusNoContent)
	jar.take(t, "logout by cookie", r)
	if len(jar) != 0 {
		t.Errorf("cookies left after logout: %v", jar)
	}
	wantProblem(t, "refresh after logout", refresh(t, is, rt), http.StatusUnauthorized, "refresh_token_revoked")
}

// The verifier accepts the access cookie for browser apps, under the same
// CSRF rule, and never lets a refused request reach the app.
func TestVerifierBrowserCookies(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--browser-origins", browserOrigin)
	email := uniqueEmail()
	register(t, is, email)
	jar := cookieJar{}
	r := browserDo(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword}, jar, browserOrigin, "")
	wantStatus(t, "browser login", r, http.StatusOK)
	jar.take(t, "browser login", r)
	csrf := r.json(t)["csrf_token"].(string)

	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-url", is.base+"/.well-known/jwks.json", "--browser-origins", browserOrigin)
	v.waitReady(t)
	wantStatus(t, "GET with the access cookie", browserDo(t, "GET", v.base+"/x", nil, jar, browserOrigin, ""), http.StatusOK)
	wantStatus(t, "POST with cookie and CSRF", browserDo(t, "POST", v.base+"/x", nil, jar, browserOrigin, csrf), http.StatusOK)
	hits := a.hits.Load()
	wantProblem(t, "POST with cookie, no CSRF", browserDo(t, "POST", v.base+"/x", nil, jar, browserOrigin, ""), http.StatusForbidden, "csrf_failed")
	wantProblem(t, "POST with cookie from another origin", browserDo(t, "POST", v.base+"/x", nil, jar, "http://evil.test", csrf), http.StatusForbidden, "csrf_failed")
	// A second access cookie, forged, beside the browser's: which one an
	// app's parser reads is its business, so neither is taken.
	two := jar.header() + "; " + verify.DefaultAccessCookie + "=" + forgedToken
	wantStatus(t, "GET with a second, forged access cookie", do(t, "GET", v.base+"/x", nil, "Origin", browserOrigin, "Cookie", two), http.StatusUnauthorized)
	if got := a.hits.Load(); got != hits {
		t.Errorf("refused requests reached the app: %d hits, want %d", got, hits)
	}
	// Authenticated by the header, the request takes no access cookie to
	// the app: nobody checked the one beside it.
	tok := login(t, is, email, strongPassword, "").Access
	wantStatus(t, "GET with a token and a forged access cookie", do(t, "GET", v.base+"/x", nil, "Authorization", "Bearer "+tok, "Cookie", "theme=dark; "+verify.DefaultAccessCookie+"="+forgedToken), http.StatusOK)
	if got := a.last().Values("Cookie"); len(got) != 1 || got[0] != "theme=dark" {
		t.Errorf("the app's Cookie beside a header token = %q, want [theme=dark]", got)
	}
}

// forgedToken is an access token with an admin's claims and no valid
// signature.
const forgedToken = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJhZG1pbiJ9.c2lnbmF0dXJl"
