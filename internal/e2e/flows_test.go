package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// TestIssuerFlows drives every flow of the issuer core over HTTP against the
// real binary, then checks that no secret reached the logs or the audit trail.
func TestIssuerFlows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		var secrets secretSet
		secrets.add(strongPassword, "wrong password 123")

		t.Run("walkthrough", func(t *testing.T) { walkthrough(t, is, &secrets) })
		t.Run("invalid credentials are indistinguishable", func(t *testing.T) { sameFailure(t, is, &secrets) })
		t.Run("reuse of a rotated token revokes every session", func(t *testing.T) { reuse(t, is, &secrets) })
		t.Run("concurrent refreshes: exactly one wins", func(t *testing.T) { concurrentRefresh(t, is, &secrets) })
		t.Run("logout is idempotent", func(t *testing.T) { logoutTwice(t, is, &secrets) })
		t.Run("logout all keeps access tokens until they expire", func(t *testing.T) { logoutAll(t, is, &secrets) })
		t.Run("sessions per device", func(t *testing.T) { sessions(t, is, &secrets) })
		t.Run("idempotency key on register", func(t *testing.T) { idempotentRegister(t, is, &secrets) })
		t.Run("well-known and health", func(t *testing.T) { wellKnown(t, is) })
		t.Run("bad input", func(t *testing.T) { badInput(t, is) })
		t.Run("any User-Agent is stored as text", func(t *testing.T) { hostileUserAgent(t, is, &secrets) })
		t.Run("cli users create and keys rotate", func(t *testing.T) { cli(t, is, &secrets) })

		t.Run("no secret in logs or audit", func(t *testing.T) {
			secrets.assertAbsent(t, "issuer log", is.logs.String())
			st := openStore(t, dbURL)
			evs, err := st.ListAudit(context.Background(), store.AuditFilter{Limit: 100000})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				t.Fatal("audit trail is empty after the run")
			}
			var all strings.Builder
			for _, e := range evs {
				b, _ := json.Marshal(e)
				all.Write(b)
				all.WriteByte('\n')
			}
			secrets.assertAbsent(t, "audit trail", all.String())
			for _, bad := range []string{"$argon2id$", "$2a$", "$2b$"} {
				if strings.Contains(all.String(), bad) || strings.Contains(is.logs.String(), bad) {
					t.Errorf("a password hash (%q) appears in the logs or the audit trail", bad)
				}
			}
		})
	})
}

// secretSet remembers every secret the test handled.
type secretSet struct {
	mu sync.Mutex
	s  []string
}

func (s *secretSet) add(v ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s = append(s.s, v...)
}

func (s *secretSet) tokens(tk tokens) tokens {
	s.add(tk.Access, tk.Refresh)
	// The signature alone is a secret-bearing part; the payload is not.
	if i := strings.LastIndexByte(tk.Access, '.'); i > 0 {
		s.add(tk.Access[i+1:])
	}
	return tk
}

func (s *secretSet) assertAbsent(t *testing.T, where, text string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.s) < 3 {
		t.Fatalf("only %d secrets recorded; the scan would prove nothing", len(s.s))
	}
	for _, v := range s.s {
		if v != "" && strings.Contains(text, v) {
			t.Errorf("%s contains a secret (%d chars starting %q)", where, len(v), v[:4])
		}
	}
}

func walkthrough(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	u := register(t, is, email)
	if u["email"] != email || u["email_verified"] != false || u["role"] != "user" || u["status"] != "enabled" || u["id"] == "" {
		t.Errorf("register body = %v", u)
	}
	for _, k := range []string{"password", "password_hash", "hash"} {
		if _, ok := u[k]; ok {
			t.Errorf("register body has %q", k)
		}
	}
	wantProblem(t, "second registration", do(t, "POST", is.base+"/v1/register",
		map[string]string{"email": strings.ToUpper(email), "password": strongPassword}), http.StatusConflict, "email_already_registered")

	r := do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword})
	wantStatus(t, "login", r, http.StatusOK)
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("login Cache-Control = %q, want no-store", cc)
	}
	m := r.json(t)
	if m["token_type"] != "Bearer" || m["expires_in"] != float64(900) {
		t.Errorf("token response = %v", m)
	}
	tk := sec.tokens(tokens{Access: m["access_token"].(string), Refresh: m["refresh_token"].(string)})
	checkClaims(t, tk.Access, u["id"].(string))

	me := do(t, "GET", is.base+"/v1/me", nil, bearer(tk.Access)...)
	wantStatus(t, "me", me, http.StatusOK)
	if got := me.json(t); got["id"] != u["id"] || got["email"] != email {
		t.Errorf("me = %v, want user %v", got, u["id"])
	}
	wantProblem(t, "me without token", do(t, "GET", is.base+"/v1/me", nil), http.StatusUnauthorized, "invalid_token")
	bad := do(t, "GET", is.base+"/v1/me", nil, bearer(tk.Access+"x")...)
	wantProblem(t, "me with tampered token", bad, http.StatusUnauthorized, "invalid_token")
	if !strings.HasPrefix(bad.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate = %q", bad.header.Get("WWW-Authenticate"))
	}

	r = refresh(t, is, tk.Refresh)
	wantStatus(t, "refresh", r, http.StatusOK)
	m = r.json(t)
	next := sec.tokens(tokens{Access: m["access_token"].(string), Refresh: m["refresh_token"].(string)})
	if next.Refresh == tk.Refresh || next.Access == tk.Access {
		t.Error("refresh returned the same tokens")
	}
	wantStatus(t, "me with refreshed token", do(t, "GET", is.base+"/v1/me", nil, bearer(next.Access)...), http.StatusOK)

	wantStatus(t, "logout", do(t, "POST", is.base+"/v1/logout", map[string]string{"refresh_token": next.Refresh}), http.StatusNoContent)
	wantProblem(t, "refresh after logout", refresh(t, is, next.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
}

// checkClaims decodes the access token's payload (not a verification: the
// verifier tests do that) and checks the claim set is exactly the contract's.
func checkClaims(t *testing.T, jwt, sub string) {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("access token has %d parts", len(parts))
	}
	var hdr, claims map[string]any
	for i, dst := range []*map[string]any{&hdr, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	if hdr["alg"] != "RS256" || hdr["typ"] != "JWT" || hdr["kid"] == nil || len(hdr) != 3 {
		t.Errorf("header = %v, want exactly alg RS256, typ JWT, kid", hdr)
	}
	want := map[string]bool{"iss": true, "aud": true, "sub": true, "role": true, "iat": true, "nbf": true, "exp": true, "jti": true, "sid": true}
	for k := range claims {
		if !want[k] {
			t.Errorf("unexpected claim %q", k)
		}
	}
	for k := range want {
		if _, ok := claims[k]; !ok {
			t.Errorf("missing claim %q", k)
		}
	}
	if claims["sub"] != sub || claims["iss"] != "http://issuer.test" || claims["aud"] != "api" {
		t.Errorf("claims = %v", claims)
	}
	if exp, iat := claims["exp"].(float64), claims["iat"].(float64); exp-iat != 900 {
		t.Errorf("exp - iat = %v, want 900", exp-iat)
	}
}

func sameFailure(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	unknown := do(t, "POST", is.base+"/v1/login", map[string]string{"email": "nobody-" + email, "password": "wrong password 123"})
	wrong := do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": "wrong password 123"})
	wantProblem(t, "unknown email", unknown, http.StatusUnauthorized, "invalid_credentials")
	wantProblem(t, "wrong password", wrong, http.StatusUnauthorized, "invalid_credentials")
	if string(unknown.body) != string(wrong.body) {
		t.Errorf("bodies differ:\nunknown email: %s\nwrong password: %s", unknown.body, wrong.body)
	}
	// The rate-limit reset is a wall-clock second: two answers a moment
	// apart may straddle one. Anything else must be equal.
	ru, rw := unknown.header.Get("X-RateLimit-Reset"), wrong.header.Get("X-RateLimit-Reset")
	if u, w := atoi(t, ru), atoi(t, rw); w-u < 0 || w-u > 1 {
		t.Errorf("X-RateLimit-Reset: unknown email %s, wrong password %s (asked later), want the same second or the next", ru, rw)
	}
	for _, h := range []http.Header{unknown.header, wrong.header} {
		h.Del("Date")
		h.Del("X-Request-Id")
		h.Del("X-RateLimit-Reset")
	}
	if a, b := headerString(unknown.header), headerString(wrong.header); a != b {
		t.Errorf("headers differ:\nunknown email: %s\nwrong password: %s", a, b)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not an integer", s)
	}
	return n
}

func headerString(h http.Header) string {
	b, _ := json.Marshal(h)
	return string(b)
}

func reuse(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	a := sec.tokens(login(t, is, email, strongPassword, "phone"))
	b := sec.tokens(login(t, is, email, strongPassword, "laptop"))
	r := refresh(t, is, a.Refresh)
	wantStatus(t, "first refresh", r, http.StatusOK)
	a2 := r.json(t)["refresh_token"].(string)
	sec.add(a2)

	wantProblem(t, "rotated token presented again", refresh(t, is, a.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	wantProblem(t, "successor after theft", refresh(t, is, a2), http.StatusUnauthorized, "refresh_token_revoked")
	wantProblem(t, "other device after theft", refresh(t, is, b.Refresh), http.StatusUnauthorized, "refresh_token_revoked")

	st := openStore(t, is.dbURL)
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Type: "refresh_token.reused", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e.SessionID == a.SessionID
	}
	if !found {
		t.Errorf("no refresh_token.reused audit entry for session %s", a.SessionID)
	}
}

func concurrentRefresh(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	tk := sec.tokens(login(t, is, email, strongPassword, ""))
	const n = 20
	statuses := make([]int, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			statuses[i] = refresh(t, is, tk.Refresh).status
		}(i)
	}
	close(gate)
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusUnauthorized:
		default:
			t.Errorf("a concurrent refresh got %d", s)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent refreshes succeeded, want exactly 1 (statuses %v)", ok, n, statuses)
	}
}

func logoutTwice(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	tk := sec.tokens(login(t, is, email, strongPassword, ""))
	for i := 1; i <= 2; i++ {
		wantStatus(t, "logout", do(t, "POST", is.base+"/v1/logout", map[string]string{"refresh_token": tk.Refresh}), http.StatusNoContent)
	}
	wantStatus(t, "logout with an unknown token", do(t, "POST", is.base+"/v1/logout",
		map[string]string{"refresh_token": "not-a-token"}), http.StatusNoContent)
	wantProblem(t, "refresh after logout", refresh(t, is, tk.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
}

func logoutAll(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	a := sec.tokens(login(t, is, email, strongPassword, "a"))
	b := sec.tokens(login(t, is, email, strongPassword, "b"))
	wantProblem(t, "logout all without token", do(t, "POST", is.base+"/v1/logout/all", nil), http.StatusUnauthorized, "invalid_token")
	wantStatus(t, "logout all", do(t, "POST", is.base+"/v1/logout/all", nil, bearer(a.Access)...), http.StatusNoContent)
	for _, tk := range []tokens{a, b} {
		wantProblem(t, "refresh after logout all", refresh(t, is, tk.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	}
	// Access tokens are stateless: they stay valid until they expire.
	wantStatus(t, "me after logout all", do(t, "GET", is.base+"/v1/me", nil, bearer(b.Access)...), http.StatusOK)
}

func sessions(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	register(t, is, email)
	phone := sec.tokens(login(t, is, email, strongPassword, "phone"))
	laptop := sec.tokens(login(t, is, email, strongPassword, "laptop"))
	phone2 := sec.tokens(login(t, is, email, strongPassword, "phone")) // replaces the first phone session

	list := func() []map[string]any {
		r := do(t, "GET", is.base+"/v1/sessions", nil, bearer(laptop.Access)...)
		wantStatus(t, "sessions", r, http.StatusOK)
		var body struct {
			Sessions []map[string]any `json:"sessions"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		return body.Sessions
	}
	got := list()
	if len(got) != 2 {
		t.Fatalf("sessions = %v, want 2 (phone replaced, laptop)", got)
	}
	ids := map[string]bool{}
	for _, s := range got {
		ids[s["id"].(string)] = true
		if (s["id"] == laptop.SessionID) != (s["current"] == true) {
			t.Errorf("session %v: current flag wrong", s)
		}
	}
	if !ids[laptop.SessionID] || !ids[phone2.SessionID] || ids[phone.SessionID] {
		t.Errorf("session ids = %v, want laptop %s and new phone %s", ids, laptop.SessionID, phone2.SessionID)
	}
	wantProblem(t, "refresh of the replaced device", refresh(t, is, phone.Refresh), http.StatusUnauthorized, "refresh_token_revoked")

	// Another user cannot see or revoke these sessions.
	other := uniqueEmail()
	register(t, is, other)
	o := sec.tokens(login(t, is, other, strongPassword, ""))
	wantProblem(t, "revoke another user's session", do(t, "DELETE", is.base+"/v1/sessions/"+laptop.SessionID, nil, bearer(o.Access)...), http.StatusNotFound, "not_found")
	wantStatus(t, "revoke own session", do(t, "DELETE", is.base+"/v1/sessions/"+phone2.SessionID, nil, bearer(laptop.Access)...), http.StatusNoContent)
	wantProblem(t, "refresh of the revoked session", refresh(t, is, phone2.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	if got := list(); len(got) != 1 || got[0]["id"] != laptop.SessionID {
		t.Errorf("sessions after revoke = %v, want only the laptop", got)
	}
}

func idempotentRegister(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	body := map[string]string{"email": email, "password": strongPassword}
	key := "key-" + email
	first := do(t, "POST", is.base+"/v1/register", body, "Idempotency-Key", key)
	wantStatus(t, "first", first, http.StatusCreated)
	second := do(t, "POST", is.base+"/v1/register", body, "Idempotency-Key", key)
	wantStatus(t, "replay", second, http.StatusCreated)
	if string(first.body) != string(second.body) {
		t.Errorf("replayed body = %s, want %s", second.body, first.body)
	}
	other := map[string]string{"email": uniqueEmail(), "password": strongPassword}
	wantProblem(t, "same key, other body", do(t, "POST", is.base+"/v1/register", other, "Idempotency-Key", key), http.StatusUnprocessableEntity, "idempotency_key_reused")
	// Without the key, the same body is a second registration attempt.
	wantProblem(t, "no key", do(t, "POST", is.base+"/v1/register", body), http.StatusConflict, "email_already_registered")

	st := openStore(t, is.dbURL)
	u, err := st.UserByEmail(context.Background(), strings.ToLower(email))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{UserID: u.ID, Type: "user.registered", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Errorf("user.registered events = %d, want 1", len(evs))
	}
}

func wellKnown(t *testing.T, is *issuer) {
	r := do(t, "GET", is.base+"/.well-known/jwks.json", nil)
	wantStatus(t, "jwks", r, http.StatusOK)
	if cc := r.header.Get("Cache-Control"); !strings.HasPrefix(cc, "public, max-age=") {
		t.Errorf("jwks Cache-Control = %q", cc)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("jwks = %s (%v)", r.body, err)
	}
	for _, k := range set.Keys {
		if k["kty"] != "RSA" || k["kid"] == nil || k["alg"] != "RS256" || k["use"] != "sig" {
			t.Errorf("jwk = %v", k)
		}
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi"} {
			if _, ok := k[private]; ok {
				t.Errorf("jwk publishes private member %q", private)
			}
		}
	}
	d := do(t, "GET", is.base+"/.well-known/openid-configuration", nil)
	wantStatus(t, "discovery", d, http.StatusOK)
	m := d.json(t)
	if m["issuer"] != "http://issuer.test" || m["jwks_uri"] != "http://issuer.test/.well-known/jwks.json" {
		t.Errorf("discovery = %v", m)
	}
	h := do(t, "GET", is.base+"/health", nil)
	wantStatus(t, "health", h, http.StatusOK)
	if string(h.body) != "{\"status\":\"ok\"}\n" {
		t.Errorf("health body = %q", h.body)
	}
	if h.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the response")
	}
	if got := do(t, "GET", is.base+"/health", nil, "X-Request-Id", "abc-123").header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("X-Request-Id echo = %q, want abc-123", got)
	}
}

func badInput(t *testing.T, is *issuer) {
	big := `{"email":"a@example.com","password":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		code                                  string
	}{
		{"malformed json", "POST", "/v1/login", "application/json", `{"email":`, 400, "malformed_request"},
		{"trailing garbage", "POST", "/v1/login", "application/json", `{"email":"a@b.c","password":"x"} {}`, 400, "malformed_request"},
		{"array body", "POST", "/v1/register", "application/json", `[1,2]`, 400, "malformed_request"},
		{"null body", "POST", "/v1/register", "application/json", `null`, 400, "malformed_request"},
		{"empty body", "POST", "/v1/refresh", "application/json", ``, 400, "malformed_request"},
		{"wrong field type", "POST", "/v1/login", "application/json", `{"email":1,"password":true}`, 400, "malformed_request"},
		{"wrong type on register", "POST", "/v1/register", "application/json", `{"email":["x"],"password":"y"}`, 400, "malformed_request"},
		{"wrong content type", "POST", "/v1/login", "text/plain", `{"email":"a@b.c","password":"x"}`, 415, "unsupported_media_type"},
		{"no content type", "POST", "/v1/register", "", `{"email":"a@b.c","password":"x"}`, 415, "unsupported_media_type"},
		{"other charset", "POST", "/v1/login", "application/json; charset=latin1", `{}`, 415, "unsupported_media_type"},
		{"oversized body", "POST", "/v1/register", "application/json", big, 413, "payload_too_large"},
		{"missing password", "POST", "/v1/login", "application/json", `{"email":"a@b.c"}`, 400, "malformed_request"},
		{"weak password at register", "POST", "/v1/register", "application/json", `{"email":"weak@example.com","password":"short"}`, 400, "validation_failed"},
		{"common password at register", "POST", "/v1/register", "application/json", `{"email":"common@example.com","password":"password1234"}`, 400, "validation_failed"},
		{"bad email at register", "POST", "/v1/register", "application/json", `{"email":"not an email","password":"` + strongPassword + `"}`, 400, "validation_failed"},
		{"refresh garbage token", "POST", "/v1/refresh", "application/json", `{"refresh_token":"\u2028<script>"}`, 401, "refresh_token_revoked"},
		// PostgreSQL cannot store U+0000 nor invalid UTF-8: these once
		// reached it and came back as 500s.
		{"NUL in the email at login", "POST", "/v1/login", "application/json", `{"email":"a\u0000@example.com","password":"x"}`, 400, "malformed_request"},
		{"NUL in a refresh token", "POST", "/v1/refresh", "application/json", `{"refresh_token":"\u0000"}`, 400, "malformed_request"},
		{"NUL in the email at forgot", "POST", "/v1/password/forgot", "application/json", `{"email":"a\u0000@example.com"}`, 400, "malformed_request"},
		{"NUL in a path id", "DELETE", "/v1/sessions/%00", "", ``, 400, "malformed_request"},
		{"invalid UTF-8 in a path id", "GET", "/v1/admin/users/%ff", "", ``, 400, "malformed_request"},
		{"NUL in a query", "GET", "/v1/admin/users?email=%00", "", ``, 400, "malformed_request"},
		{"bad escape in a query", "GET", "/v1/admin/audit?type=%zz", "", ``, 400, "malformed_request"},
		{"unknown route", "GET", "/v1/nope", "", ``, 404, "not_found"},
		{"wrong method", "GET", "/v1/login", "", ``, 405, "method_not_allowed"},
		{"invalid utf-8", "POST", "/v1/login", "application/json", "{\"email\":\"\xff\xfe\",\"password\":\"\xc0\"}", 401, "invalid_credentials"},
		{"garbage bearer", "GET", "/v1/me", "", ``, 401, "invalid_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, is.base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.name == "garbage bearer" {
				req.Header.Set("Authorization", "Bearer a.b.c")
			}
			wantProblem(t, tt.name, send(t, req), tt.status, tt.code)
		})
	}
	// The server is still healthy after all that.
	wantStatus(t, "health after bad input", do(t, "GET", is.base+"/health", nil), http.StatusOK)
}

// hostileUserAgent: the User-Agent is the client's bytes, stored with the
// session and the audit trail. Invalid UTF-8 and control characters once
// made PostgreSQL refuse the login (a 500); now they are replaced or
// dropped, and the flows work.
func hostileUserAgent(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	const ua = "bad \xff\xfe agent \xc2\x85 end"
	r := do(t, "POST", is.base+"/v1/register", map[string]string{"email": email, "password": strongPassword}, "User-Agent", ua)
	wantStatus(t, "register with a hostile User-Agent", r, http.StatusCreated)
	r = do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword, "device_id": "d"}, "User-Agent", ua)
	wantStatus(t, "login with a hostile User-Agent", r, http.StatusOK)
	var tk struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if err := json.Unmarshal(r.body, &tk); err != nil {
		t.Fatal(err)
	}
	sec.add(tk.Access, tk.Refresh)
	r = do(t, "POST", is.base+"/v1/refresh", map[string]string{"refresh_token": tk.Refresh}, "User-Agent", ua)
	wantStatus(t, "refresh with a hostile User-Agent", r, http.StatusOK)
	r = do(t, "GET", is.base+"/v1/sessions", nil, bearer(tk.Access)...)
	wantStatus(t, "sessions", r, http.StatusOK)
	var list struct {
		Sessions []struct {
			UserAgent string `json:"user_agent"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("sessions = %s (%v), want one", r.body, err)
	}
	if got, want := list.Sessions[0].UserAgent, "bad \ufffd agent  end"; got != want {
		t.Errorf("stored User-Agent = %q, want %q", got, want)
	}
}

func cli(t *testing.T, is *issuer, sec *secretSet) {
	email := uniqueEmail()
	adminPassword := "a long admin passphrase 42"
	sec.add(adminPassword)
	out, err := is.cli(t, adminPassword+"\n", "users", "create", "--email", email, "--role", "admin", "--password-stdin")
	if err != nil {
		t.Fatalf("users create: %v\n%s", err, out)
	}
	if strings.Contains(out, adminPassword) {
		t.Error("users create echoed the password")
	}
	tk := sec.tokens(login(t, is, email, adminPassword, ""))
	parts := strings.Split(tk.Access, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	_ = json.Unmarshal(raw, &claims)
	if claims["role"] != "admin" {
		t.Errorf("role claim = %v, want admin", claims["role"])
	}

	before := kids(t, is)
	out, err = is.cli(t, "", "keys", "rotate", "--activate-in", "0s")
	if err != nil {
		t.Fatalf("keys rotate: %v\n%s", err, out)
	}
	out, err = is.cli(t, "", "keys", "list")
	if err != nil || !strings.Contains(out, "active") || !strings.Contains(out, "retired") {
		t.Fatalf("keys list after rotate = %v\n%s", err, out)
	}
	// The running issuer sees the new key within its reload interval; until
	// then both keys are published and the old one keeps verifying.
	deadline := time.Now().Add(90 * time.Second)
	for {
		after := kids(t, is)
		if len(after) == len(before)+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jwks kids = %v after rotation, want %d keys", after, len(before)+1)
		}
		time.Sleep(200 * time.Millisecond)
	}
	wantStatus(t, "old-key token after rotation", do(t, "GET", is.base+"/v1/me", nil, bearer(tk.Access)...), http.StatusOK)
	st := openStore(t, is.dbURL)
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Type: "signing_key.rotated", Limit: 10})
	viaCLI := 0
	for _, e := range evs {
		// Scheduled rotations (--key-rotation-interval) say "schedule".
		var data struct {
			Via string `json:"via"`
		}
		if json.Unmarshal(e.Data, &data) == nil && data.Via == "cli" {
			viaCLI++
		}
	}
	if err != nil || viaCLI != 1 {
		t.Errorf("signing_key.rotated events via cli = %d (%v), want 1", viaCLI, err)
	}
}

func kids(t *testing.T, is *issuer) []string {
	t.Helper()
	r := do(t, "GET", is.base+"/.well-known/jwks.json", nil)
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KID)
	}
	return out
}
