package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// gateway is one way into the app that checks tokens: the verifier binary,
// or a Go service embedding pkg/verify's middleware.
type gateway struct {
	name string
	url  string
}

// middlewareGateway serves an app behind pkg/verify's middleware, with its
// key set and revocation list from the issuer.
func middlewareGateway(t *testing.T, is *issuer, poll time.Duration) gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	keys, err := verify.NewRemoteSource(ctx, is.base+"/.well-known/jwks.json", verify.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revs, err := verify.NewRevocationSource(ctx, is.base+"/v1/revocations", verify.RevocationOptions{PollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close(); revs.Close() })
	if err := keys.Refresh(ctx); err != nil {
		t.Fatalf("key set: %v", err)
	}
	if err := revs.Refresh(ctx); err != nil {
		t.Fatalf("revocation list: %v", err)
	}
	v, err := verify.New(keys, verify.Config{
		Issuer: "http://issuer.test", Audience: "api", ClockSkew: 30 * time.Second, CacheSize: 1000, Revocations: revs,
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h := verify.Middleware(v, verify.OnReject(func(r *http.Request, err error) {
		log.Debug("token rejected", "reason", verify.ReasonOf(err))
	}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := verify.FromContext(r.Context())
		w.Write([]byte("hello " + id.Subject))
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return gateway{name: "middleware", url: srv.URL}
}

// waitRefused polls gw with tok until it answers 401 and returns how long
// that took; generous deadline, the latency is reported, never asserted.
func waitRefused(t *testing.T, gw gateway, tok string, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := do(t, "GET", gw.url+"/orders", nil, bearer(tok)...)
		switch r.status {
		case http.StatusUnauthorized:
			return time.Since(since)
		case http.StatusOK:
		default:
			t.Fatalf("%s: GET /orders = %d %s, want 200 or 401", gw.name, r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: token still accepted 30s after its revocation", gw.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVerifierRevocations runs the real issuer with the verifier in front
// of an app, and a Go service with pkg/verify's middleware, both polling
// the revocation feed every 200ms: every way a session ends on the issuer
// refuses its access token at both within a few polls (the latency is
// logged), while the tokens of other sessions keep working; a revoked
// signing key takes every token it signed with it.
func TestVerifierRevocations(t *testing.T) {
	const poll = 200 * time.Millisecond
	is := startIssuer(t, testdb.SQLite(t))
	a := newApp(t)
	v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-url", is.base+"/.well-known/jwks.json",
		"--revocation-url", is.base+"/v1/revocations", "--revocation-poll-interval", poll.String())
	v.waitReady(t)
	gateways := []gateway{{name: "verifier", url: v.base}, middlewareGateway(t, is, poll)}

	adminEmail := uniqueEmail()
	if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", adminEmail, "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create --role admin: %v\n%s", err, out)
	}
	admin := login(t, is, adminEmail, strongPassword, "admin-laptop")
	bystanderEmail := uniqueEmail()
	register(t, is, bystanderEmail)
	bystander := login(t, is, bystanderEmail, strongPassword, "desk")

	for _, tc := range []struct {
		name string
		// revoke ends sessions of a user logged in on laptop and phone;
		// phoneKept says whether the phone's session survives.
		revoke    func(t *testing.T, id string, laptop, phone tokens)
		phoneKept bool
	}{
		{"Logout", func(t *testing.T, _ string, laptop, _ tokens) {
			wantStatus(t, "logout", do(t, "POST", is.base+"/v1/logout", map[string]string{"refresh_token": laptop.Refresh}), http.StatusNoContent)
		}, true},
		{"LogoutAll", func(t *testing.T, _ string, laptop, _ tokens) {
			wantStatus(t, "logout all", do(t, "POST", is.base+"/v1/logout/all", nil, bearer(laptop.Access)...), http.StatusNoContent)
		}, false},
		{"DisableByAdmin", func(t *testing.T, id string, _, _ tokens) {
			wantStatus(t, "disable", do(t, "PATCH", is.base+"/v1/admin/users/"+id, map[string]string{"status": "disabled"}, bearer(admin.Access)...), http.StatusOK)
		}, false},
		{"PasswordChange", func(t *testing.T, _ string, laptop, _ tokens) {
			wantStatus(t, "password change", do(t, "POST", is.base+"/v1/password/change",
				map[string]string{"current_password": strongPassword, "new_password": strongPassword + " again"}, bearer(laptop.Access)...), http.StatusNoContent)
		}, false},
		{"RefreshTokenReuse", func(t *testing.T, _ string, laptop, _ tokens) {
			wantStatus(t, "refresh", refresh(t, is, laptop.Refresh), http.StatusOK)
			wantProblem(t, "refresh with the rotated token", refresh(t, is, laptop.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			email := uniqueEmail()
			id := register(t, is, email)["id"].(string)
			laptop := login(t, is, email, strongPassword, "laptop")
			phone := login(t, is, email, strongPassword, "phone")
			for _, gw := range gateways {
				for _, tok := range []string{laptop.Access, phone.Access} { // the second round from the cache
					wantStatus(t, gw.name+" before the revocation", do(t, "GET", gw.url+"/orders", nil, bearer(tok)...), http.StatusOK)
				}
			}
			start := time.Now()
			tc.revoke(t, id, laptop, phone)
			for _, gw := range gateways {
				t.Logf("%s: the laptop's token refused %v after the revocation (poll interval %v)", gw.name, waitRefused(t, gw, laptop.Access, start), poll)
				r := do(t, "GET", gw.url+"/orders", nil, bearer(phone.Access)...)
				if tc.phoneKept {
					wantStatus(t, gw.name+": the phone's token after the laptop's logout", r, http.StatusOK)
				} else {
					waitRefused(t, gw, phone.Access, start)
				}
				wantStatus(t, gw.name+": another user's token", do(t, "GET", gw.url+"/orders", nil, bearer(bystander.Access)...), http.StatusOK)
			}
		})
	}

	t.Run("SigningKeyRevoked", func(t *testing.T) {
		kid := kidOf(t, bystander.Access)
		start := time.Now()
		// Through the issuer serving the logins, which then signs with the
		// successor at once (the CLI's change would reach it within
		// --key-reload-interval).
		wantStatus(t, "revoke "+kid, do(t, "POST", is.base+"/v1/admin/keys/"+kid+"/revoke", nil, bearer(admin.Access)...), http.StatusOK)
		for _, gw := range gateways {
			t.Logf("%s: a token of the revoked key refused %v after the revocation", gw.name, waitRefused(t, gw, bystander.Access, start))
		}
		fresh := login(t, is, bystanderEmail, strongPassword, "desk")
		if kidOf(t, fresh.Access) == kid {
			t.Fatalf("a login after the revocation got a token of the revoked key %s", kid)
		}
		for _, gw := range gateways {
			// The successor may be new to the gateway: its unknown-kid
			// refetch brings it.
			deadline := time.Now().Add(30 * time.Second)
			for r := do(t, "GET", gw.url+"/orders", nil, bearer(fresh.Access)...); r.status != http.StatusOK; r = do(t, "GET", gw.url+"/orders", nil, bearer(fresh.Access)...) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: a token of the successor key = %d, want 200 within 30s", gw.name, r.status)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})

	metrics := string(do(t, "GET", v.admin+"/metrics", nil).body)
	for _, series := range []string{
		`verifier_requests_total{outcome="rejected",reason="session_revoked"}`,
		`verifier_requests_total{outcome="rejected",reason="key_revoked"}`,
		"verifier_revocations_staleness_seconds",
		"verifier_revocations_entries",
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if strings.Contains(metrics, `reason="session_revoked"} 0`) {
		t.Errorf("/metrics counts no session_revoked refusal")
	}
	r := do(t, "GET", v.admin+"/readyz", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"loaded":true`) {
		t.Errorf("/readyz = %d %s, want 200 with the revocation list loaded", r.status, r.body)
	}
}

// TestVerifierRevocationsStale stops the issuer under two verifiers: the
// one with --revocation-fail-closed refuses every token once the list is
// older than --revocation-max-staleness; the other keeps trusting
// signatures. Both report the staleness on /readyz and stay ready.
func TestVerifierRevocationsStale(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t))
	email := uniqueEmail()
	register(t, is, email)
	tok := login(t, is, email, strongPassword, "laptop")
	a := newApp(t)
	args := []string{"--upstream", a.srv.URL, "--jwks-url", is.base + "/.well-known/jwks.json",
		"--revocation-url", is.base + "/v1/revocations", "--revocation-poll-interval", "200ms", "--revocation-max-staleness", "1s"}
	closed := startVerifier(t, append(args, "--revocation-fail-closed")...)
	open := startVerifier(t, args...)
	for _, v := range []*verifierProc{closed, open} {
		v.waitReady(t)
		wantStatus(t, "GET /orders with a fresh list", do(t, "GET", v.base+"/orders", nil, bearer(tok.Access)...), http.StatusOK)
	}

	is.stop(t)
	for _, v := range []*verifierProc{closed, open} {
		deadline := time.Now().Add(30 * time.Second)
		for r := do(t, "GET", v.admin+"/readyz", nil); !strings.Contains(string(r.body), `"stale":true`); r = do(t, "GET", v.admin+"/readyz", nil) {
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %s 30s after the issuer stopped, want the list stale", r.status, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r := do(t, "GET", v.admin+"/readyz", nil); r.status != http.StatusOK {
			t.Errorf("/readyz with a stale list = %d %s, want 200 (the list loaded once)", r.status, r.body)
		}
	}
	wantProblem(t, "fail closed, stale list", do(t, "GET", closed.base+"/orders", nil, bearer(tok.Access)...), http.StatusUnauthorized, "invalid_token")
	wantStatus(t, "fail open, stale list", do(t, "GET", open.base+"/orders", nil, bearer(tok.Access)...), http.StatusOK)
	if m := string(do(t, "GET", closed.admin+"/metrics", nil).body); !strings.Contains(m, `verifier_requests_total{outcome="rejected",reason="revocations_stale"} 1`) {
		t.Errorf("/metrics of the fail-closed verifier does not count one revocations_stale refusal")
	}
}
