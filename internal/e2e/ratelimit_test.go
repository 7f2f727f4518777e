package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// metric reads one unlabelled sample from the issuer's admin /metrics.
func (is *issuer) metric(t *testing.T, name string) float64 {
	t.Helper()
	r := do(t, "GET", "http://"+is.addr["admin"]+"/metrics", nil)
	wantStatus(t, "GET /metrics", r, http.StatusOK)
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s = %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// wantRateHeaders checks the X-RateLimit-* headers of an answer.
func wantRateHeaders(t *testing.T, what string, r response, limit, remaining int) {
	t.Helper()
	if got := r.header.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Errorf("%s: X-RateLimit-Limit = %q, want %d", what, got, limit)
	}
	if got := r.header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Errorf("%s: X-RateLimit-Remaining = %q, want %d", what, got, remaining)
	}
	reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
	if now := time.Now().Unix(); err != nil || reset < now || reset > now+3601 {
		t.Errorf("%s: X-RateLimit-Reset = %q, want Unix seconds within the next hour", what, r.header.Get("X-RateLimit-Reset"))
	}
}

func want429(t *testing.T, what string, r response, limit int) {
	t.Helper()
	wantProblem(t, what, r, http.StatusTooManyRequests, "rate_limited")
	wantRateHeaders(t, what, r, limit, 0)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("%s: Retry-After = %q, want whole seconds >= 1", what, r.header.Get("Retry-After"))
	}
}

func loginAttempt(t *testing.T, is *issuer, email, password string, headers ...string) response {
	t.Helper()
	return do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": password}, headers...)
}

func countAudit(t *testing.T, st store.Store, typ string) int {
	t.Helper()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Type: typ, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func TestRateLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		// One database, one key-encryption key for the issuers run on it.
		kek := kekFile(t)
		startIssuer := func(t *testing.T, dbURL string, extra ...string) *issuer {
			return startIssuerWithKEK(t, dbURL, kek, extra...)
		}
		t.Run("login per address; a refused login does no work", func(t *testing.T) {
			is := startIssuer(t, dbURL, "--rate-limit", "login=3/1m")
			email := uniqueEmail()
			register(t, is, email)
			st := openStore(t, dbURL)
			for i := 0; i < 3; i++ {
				r := loginAttempt(t, is, email, "wrong password, attempt "+strconv.Itoa(i),
					"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)) // from an untrusted peer: ignored
				wantProblem(t, "login within the limit", r, http.StatusUnauthorized, "invalid_credentials")
				wantRateHeaders(t, "login within the limit", r, 3, 2-i)
			}
			hashes, failures := is.metric(t, "issuer_password_hashes_total"), countAudit(t, st, "login.failed")
			r := loginAttempt(t, is, email, strongPassword, "X-Forwarded-For", "203.0.113.9")
			want429(t, "login over the limit, right password, rotated X-Forwarded-For", r, 3)
			// No user lookup, no hash, no audit entry: the limit came first.
			if got := is.metric(t, "issuer_password_hashes_total"); got != hashes {
				t.Errorf("password hashes after a refused login = %v, want %v (unchanged)", got, hashes)
			}
			if got := countAudit(t, st, "login.failed"); got != failures {
				t.Errorf("login.failed entries after a refused login = %d, want %d (unchanged)", got, failures)
			}
			// Other limits are counted apart.
			wantStatus(t, "register from the same address", do(t, "POST", is.base+"/v1/register",
				map[string]string{"email": uniqueEmail(), "password": strongPassword}), http.StatusCreated)
		})

		t.Run("login per email across addresses", func(t *testing.T) {
			// 127.0.0.1 is a trusted proxy here, so each forwarded address
			// is its own client; the per-email limit still holds.
			is := startIssuer(t, dbURL, "--trusted-proxies", "127.0.0.1/32", "--rate-limit", "login=100/1m", "--rate-limit", "login_email=2/1m")
			email := uniqueEmail()
			register(t, is, email)
			for i := 0; i < 2; i++ {
				r := loginAttempt(t, is, strings.ToUpper(email), "wrong password here", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
				wantProblem(t, "login within the email limit", r, http.StatusUnauthorized, "invalid_credentials")
				wantRateHeaders(t, "login within the email limit", r, 2, 1-i)
			}
			want429(t, "third login for the email from a third address",
				loginAttempt(t, is, email, strongPassword, "X-Forwarded-For", "198.51.100.77"), 2)
			// Another email from the same addresses is not affected.
			other := uniqueEmail()
			register(t, is, other)
			r := loginAttempt(t, is, other, strongPassword, "X-Forwarded-For", "198.51.100.0")
			wantStatus(t, "login for another email", r, http.StatusOK)
			if got := r.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("token response Cache-Control = %q, want no-store", got)
			}
		})

		t.Run("every limited endpoint", func(t *testing.T) {
			var args []string
			for _, n := range []string{"register", "refresh", "password_forgot", "password_reset", "email_verify"} {
				args = append(args, "--rate-limit", n+"=1/1h")
			}
			is := startIssuer(t, dbURL, args...)
			endpoints := []struct{ path, body string }{
				{"/v1/register", `{"email":"` + uniqueEmail() + `","password":"` + strongPassword + `"}`},
				{"/v1/refresh", `{"refresh_token":"` + strings.Repeat("A", 43) + `"}`},
				{"/v1/password/forgot", `{"email":"` + uniqueEmail() + `"}`},
				{"/v1/password/reset", `{"token":"` + strings.Repeat("A", 43) + `","new_password":"` + strongPassword + `"}`},
				{"/v1/email/verify", `{"token":"` + strings.Repeat("A", 43) + `"}`},
			}
			for _, ep := range endpoints {
				first := do(t, "POST", is.base+ep.path, ep.body)
				if first.status == http.StatusTooManyRequests {
					t.Fatalf("first POST %s: 429", ep.path)
				}
				wantRateHeaders(t, "first POST "+ep.path, first, 1, 0)
				want429(t, "second POST "+ep.path, do(t, "POST", is.base+ep.path, ep.body), 1)
				// Even a malformed body is refused by the limit, not read.
				want429(t, "malformed POST "+ep.path, do(t, "POST", is.base+ep.path, "{not json"), 1)
			}
			// Endpoints without a limit carry no headers.
			if r := do(t, "GET", is.base+"/health", nil); r.header.Get("X-RateLimit-Limit") != "" {
				t.Errorf("GET /health carries X-RateLimit-Limit")
			}
		})
	})
}

// Two replicas over one PostgreSQL share the counters: logins spread over
// both meet the limit at the configured total, not at twice it.
func TestRateLimitsSharedAcrossInstances(t *testing.T) {
	dbURL := backends()[1].url(t)
	kek := kekFile(t)
	const limit = 4
	a := startIssuerWithKEK(t, dbURL, kek, "--rate-limit", fmt.Sprintf("login=%d/1m", limit))
	b := startIssuerWithKEK(t, dbURL, kek, "--rate-limit", fmt.Sprintf("login=%d/1m", limit))
	email := uniqueEmail()
	register(t, a, email)
	both := []*issuer{a, b}
	for i := 0; i < limit; i++ {
		r := loginAttempt(t, both[i%2], email, strongPassword)
		wantStatus(t, fmt.Sprintf("login %d on instance %d", i+1, i%2), r, http.StatusOK)
		wantRateHeaders(t, fmt.Sprintf("login %d on instance %d", i+1, i%2), r, limit, limit-1-i)
	}
	for i, is := range both {
		want429(t, fmt.Sprintf("login over the total on instance %d", i), loginAttempt(t, is, email, strongPassword), limit)
	}
}

// With the rate_limits table locked, the issuer on PostgreSQL waits on
// its counters at most their timeout, then applies each limit's policy:
// login (fail closed) answers 503 rate_limit_unavailable, forgot-password
// (fail open) 202. Before, both waited as long as the lock was held.
func TestRateLimitsDatabaseLocked(t *testing.T) {
	dbURL := backends()[1].url(t)
	is := startIssuer(t, dbURL)
	email := uniqueEmail()
	register(t, is, email)
	release := testdb.LockTable(t, dbURL, "rate_limits")
	// The lock outlasts the harness client's 30 s: only the timeout ends a take.
	wantProblem(t, "login with the counters locked", loginAttempt(t, is, email, strongPassword), http.StatusServiceUnavailable, "rate_limit_unavailable")
	wantStatus(t, "forgot-password with the counters locked", postJSON(t, is.base+"/v1/password/forgot", fmt.Sprintf(`{"email":%q}`, email)), http.StatusAccepted)
	release()
	wantStatus(t, "login once the lock is gone", loginAttempt(t, is, email, strongPassword), http.StatusOK)
}

// With the hashing pool and its queue full, login answers 503 at once
// instead of queueing.
func TestLoginLoadShedding(t *testing.T) {
	is := startIssuer(t, backends()[0].url(t), "--hash-concurrency", "1", "--hash-queue", "1")
	email := uniqueEmail()
	register(t, is, email)
	const n = 24
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		shed     []response
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := loginAttempt(t, is, email, strongPassword)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			if r.status == http.StatusServiceUnavailable {
				shed = append(shed, r)
			}
		}()
	}
	close(start)
	wg.Wait()
	if statuses[http.StatusOK] == 0 || len(shed) == 0 || statuses[http.StatusOK]+len(shed) != n {
		t.Fatalf("%d concurrent logins with one hashing slot and a queue of one: statuses %v, want some 200s, some 503s and nothing else", n, statuses)
	}
	for _, r := range shed {
		wantProblem(t, "shed login", r, http.StatusServiceUnavailable, "overloaded")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("shed login: no Retry-After")
		}
	}
	// Shed logins did no hashing: only the admitted ones (and register) did.
	if got, want := is.metric(t, "issuer_password_hashes_total"), float64(1+statuses[http.StatusOK]); got != want {
		t.Errorf("password hashes = %v, want %v (register + admitted logins)", got, want)
	}
}

// from sends a request as if from addr, for issuers that trust 127.0.0.1
// as a proxy.
func from(addr string) []string { return []string{"X-Forwarded-For", addr} }

// TestLoginCannotLockTheOwnerOut: guesses from other addresses spend their
// own (email, address) quotas and a per-email ceiling, but an address the
// owner logged in from still gets in, and a completed password reset
// clears the ceiling and lets the resetting address in.
func TestLoginCannotLockTheOwnerOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "http://issuer.test"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr(), "--trusted-proxies", "127.0.0.1/32",
			"--rate-limit", "login=1000/1m", "--rate-limit", "login_email_client=3/15m", "--rate-limit", "login_email=5/1h")...)
		email := uniqueEmail()
		register(t, is, email)
		const home, phone, attacker = "192.0.2.10", "203.0.113.5", "198.51.100.1"
		wantStatus(t, "the owner's login from home", loginAttempt(t, is, email, strongPassword, from(home)...), http.StatusOK)

		// One address: three guesses, then its pair is spent. Its refused
		// guesses do not count against the email.
		for i := 0; i < 3; i++ {
			wantProblem(t, "guess from one address", loginAttempt(t, is, email, "wrong guess "+strconv.Itoa(i), from(attacker)...),
				http.StatusUnauthorized, "invalid_credentials")
		}
		for i := 0; i < 3; i++ {
			want429(t, "more guesses from that address", loginAttempt(t, is, email, "wrong guess", from(attacker)...), 3)
		}
		// Other addresses: the email's ceiling (5, the owner's login
		// included) bounds them all together.
		wantProblem(t, "guess from a second address", loginAttempt(t, is, email, "wrong guess", from("198.51.100.2")...),
			http.StatusUnauthorized, "invalid_credentials")
		want429(t, "guess from a third address", loginAttempt(t, is, email, "wrong guess", from("198.51.100.3")...), 5)
		want429(t, "the right password from an address never used", loginAttempt(t, is, email, strongPassword, from(phone)...), 5)

		// The owner at home is not locked out, however spent the ceiling is.
		for i := 0; i < 2; i++ {
			wantStatus(t, "the owner's login from home, ceiling spent", loginAttempt(t, is, email, strongPassword, from(home)...), http.StatusOK)
		}

		// On the phone, the owner resets the password: that clears the
		// ceiling and lets the phone in.
		wantStatus(t, "forgot", do(t, "POST", is.base+"/v1/password/forgot", map[string]string{"email": email}, from(phone)...), http.StatusAccepted)
		tok := mailToken(t, waitMail(t, srv, email, base, "/reset-password"), base, "/reset-password")
		const newPassword = "an entirely new passphrase"
		wantStatus(t, "reset from the phone", do(t, "POST", is.base+"/v1/password/reset",
			map[string]string{"token": tok, "new_password": newPassword}, from(phone)...), http.StatusNoContent)
		wantStatus(t, "login from the phone after the reset", loginAttempt(t, is, email, newPassword, from(phone)...), http.StatusOK)
		wantProblem(t, "a guess from a new address after the reset (the ceiling started over)",
			loginAttempt(t, is, email, "wrong guess", from("198.51.100.4")...), http.StatusUnauthorized, "invalid_credentials")
		// The guesser's own spent pair stays spent.
		want429(t, "the first guessing address after the reset", loginAttempt(t, is, email, newPassword, from(attacker)...), 3)
	})
}

// TestPasswordChangeGuessing: wrong current passwords at password change
// are bounded per user, across addresses and sessions, and a refused
// attempt hashes nothing.
func TestPasswordChangeGuessing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL, "--trusted-proxies", "127.0.0.1/32", "--rate-limit", "password_change=3/15m")
		email, other := uniqueEmail(), uniqueEmail()
		register(t, is, email)
		register(t, is, other)
		stolen := login(t, is, email, strongPassword, "laptop")
		change := func(access, current string, headers ...string) response {
			return do(t, "POST", is.base+"/v1/password/change",
				map[string]string{"current_password": current, "new_password": "an entirely new passphrase"}, append(bearer(access), headers...)...)
		}
		for i := 0; i < 3; i++ {
			r := change(stolen.Access, "wrong guess "+strconv.Itoa(i), from(fmt.Sprintf("198.51.100.%d", i))...)
			wantProblem(t, "wrong current password", r, http.StatusForbidden, "current_password_incorrect")
			wantRateHeaders(t, "wrong current password", r, 3, 2-i)
		}
		hashes := is.metric(t, "issuer_password_hashes_total")
		want429(t, "fourth attempt, right password, another address", change(stolen.Access, strongPassword, from("203.0.113.9")...), 3)
		if got := is.metric(t, "issuer_password_hashes_total"); got != hashes {
			t.Errorf("password hashes after a refused change = %v, want %v (unchanged)", got, hashes)
		}
		phone := login(t, is, email, strongPassword, "phone")
		want429(t, "another session of the same user", change(phone.Access, strongPassword), 3)
		// Authentication comes first: a request without a valid token is
		// not counted against anyone.
		wantProblem(t, "change without a token", do(t, "POST", is.base+"/v1/password/change",
			map[string]string{"current_password": "x", "new_password": "y"}), http.StatusUnauthorized, "invalid_token")
		wantStatus(t, "another user's change", change(login(t, is, other, strongPassword, "laptop").Access, strongPassword), http.StatusNoContent)
	})
}

// TestForgotPasswordPerAccount: past the per-account cap, forgot-password
// answers exactly as always and sends nothing; other accounts are not
// affected.
func TestForgotPasswordPerAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "http://issuer.test"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr(), "--rate-limit", "password_forgot_email=2/1h")...)
		st := openStore(t, dbURL)
		known, other, unknown := uniqueEmail(), uniqueEmail(), uniqueEmail()
		for _, e := range []string{known, other} {
			register(t, is, e)
			waitRecorded(t, is, waitMail(t, srv, e, base, "/verify-email"))
		}
		isReset := func(m mailtest.Message) bool {
			return mailtest.To(known)(m) && strings.Contains(m.Text, "/reset-password?token=")
		}
		ref := forgot(t, is, unknown)
		wantStatus(t, "forgot(unknown)", ref, http.StatusAccepted)
		same := func(what string, r response) {
			t.Helper()
			if r.status != ref.status || !bytes.Equal(r.body, ref.body) || r.header.Get("Content-Type") != ref.header.Get("Content-Type") {
				t.Errorf("%s = %d %s %q, want the answer to an unknown address: %d %s %q", what,
					r.status, r.header.Get("Content-Type"), r.body, ref.status, ref.header.Get("Content-Type"), ref.body)
			}
		}
		// Within the cap, a mail each (sent before the next request, so
		// that no newer link replaces one still queued).
		for i := 1; i <= 2; i++ {
			same("forgot(known) within the cap", forgot(t, is, known))
			waitRecorded(t, is, srv.WaitN(t, mailWait, i, isReset)[i-1])
		}
		// Over it, however spelled: the same answer, and no mail.
		for i := 0; i < 4; i++ {
			same("forgot(known) over the cap", forgot(t, is, strings.ToUpper(known)))
			same("forgot(unknown) over the cap", forgot(t, is, unknown))
		}
		// Another account still gets its mail. The requests above were
		// answered before it was asked for.
		same("forgot(other)", forgot(t, is, other))
		waitRecorded(t, is, waitMail(t, srv, other, base, "/reset-password"))
		assertQueueEmpty(t, st)
		n := 0
		for _, m := range srv.Messages() {
			if isReset(m) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("reset mails to one account after 6 requests = %d, want 2 (the cap)", n)
		}
	})
}
