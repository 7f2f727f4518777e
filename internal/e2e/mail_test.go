package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/token"
)

// mailWait bounds how long a test waits for a mail the issuer should send
// at once.
const mailWait = 30 * time.Second

// smtpFlags points an issuer at an SMTP server on a loopback address.
func smtpFlags(addr string, extra ...string) []string {
	return append([]string{"--mail-mode", "smtp", "--smtp-url", "smtp://" + addr,
		"--mail-from", "Palisade <no-reply@issuer.test>"}, extra...)
}

// waitMail waits for a mail to `to` whose link goes to base+path.
func waitMail(t testing.TB, srv *mailtest.Server, to, base, path string) mailtest.Message {
	t.Helper()
	return srv.Wait(t, mailWait, func(m mailtest.Message) bool {
		return mailtest.To(to)(m) && strings.Contains(m.Text, base+path+"?token=")
	})
}

// mailToken returns the token of the link base+path?token=... that the
// mail carries, after checking that its text and its HTML part carry the
// very same link.
func mailToken(t *testing.T, m mailtest.Message, base, path string) string {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(base+path+"?token=") + `([A-Za-z0-9_-]+)`)
	sub := re.FindStringSubmatch(m.Text)
	if sub == nil {
		t.Fatalf("text part has no link %s%s?token=...:\n%s", base, path, m.Text)
	}
	if !token.WellFormed(sub[1]) {
		t.Fatalf("the link's token %q is not a well-formed opaque token", sub[1])
	}
	if !strings.Contains(m.HTML, `href="`+sub[0]+`"`) {
		t.Fatalf("HTML part does not link to %s:\n%s", sub[0], m.HTML)
	}
	return sub[1]
}

// mailID is the queue job behind a delivered mail: its Message-ID.
func mailID(t testing.TB, m mailtest.Message) string {
	t.Helper()
	id := strings.TrimPrefix(m.Header.Get("Message-Id"), "<")
	if i := strings.IndexByte(id, '@'); i > 0 {
		return id[:i]
	}
	t.Fatalf("mail has no usable Message-ID: %q", m.Header.Get("Message-Id"))
	return ""
}

// logLine reports whether l is a JSON log line with msg and every given
// attribute.
func logLine(l, msg string, attrs map[string]string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != msg {
		return false
	}
	for k, v := range attrs {
		if m[k] != v {
			return false
		}
	}
	return true
}

// waitRecorded waits until the issuer has recorded mail m as sent.
func waitRecorded(t testing.TB, is *issuer, m mailtest.Message) {
	t.Helper()
	id := mailID(t, m)
	if _, ok := is.logs.waitFor(time.Now().Add(mailWait), func(l string) bool {
		return logLine(l, "mail sent", map[string]string{"mail_id": id})
	}); !ok {
		t.Fatalf("the issuer never recorded mail %s as sent", id)
	}
}

// assertQueueEmpty checks that no mail is waiting, now or for a retry
// later. (It leases what it finds, so call it once, when the queue should
// be empty.)
func assertQueueEmpty(t *testing.T, st store.Store) {
	t.Helper()
	jobs, err := st.ClaimMail(context.Background(), time.Now().Add(1000*time.Hour), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		t.Errorf("mail %s (%s to %s) is still queued, want an empty queue", j.ID, j.Kind, j.To)
	}
}

func forgot(t testing.TB, is *issuer, email string) response {
	t.Helper()
	return do(t, "POST", is.base+"/v1/password/forgot", map[string]string{"email": email})
}

func me(t *testing.T, is *issuer, access string) map[string]any {
	t.Helper()
	r := do(t, "GET", is.base+"/v1/me", nil, bearer(access)...)
	wantStatus(t, "me", r, http.StatusOK)
	return r.json(t)
}

// TestMailFlows drives the account mails end to end: the real issuer sends
// them to a real SMTP server, and the test follows their links as a user
// would.
func TestMailFlows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "https://app.test/account"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr(), "--public-url", base+"/")...)
		st := openStore(t, dbURL)
		var secrets secretSet
		email := uniqueEmail()
		register(t, is, email)
		laptop := login(t, is, email, strongPassword, "laptop")
		secrets.tokens(laptop)

		t.Run("the verification mail sent at register verifies the email", func(t *testing.T) {
			m := waitMail(t, srv, email, base, "/verify-email")
			if m.Subject != "Verify your email address" || m.From != "no-reply@issuer.test" {
				t.Errorf("verification mail: subject %q from %q", m.Subject, m.From)
			}
			tok := mailToken(t, m, base, "/verify-email")
			secrets.add(tok)
			if got := me(t, is, laptop.Access)["email_verified"]; got != false {
				t.Fatalf("email_verified before verification = %v, want false", got)
			}
			wantStatus(t, "verify", do(t, "POST", is.base+"/v1/email/verify", map[string]string{"token": tok}), http.StatusNoContent)
			if got := me(t, is, laptop.Access)["email_verified"]; got != true {
				t.Errorf("email_verified after verification = %v, want true", got)
			}
			wantProblem(t, "verify again", do(t, "POST", is.base+"/v1/email/verify", map[string]string{"token": tok}),
				http.StatusBadRequest, "invalid_verification_token")
			waitRecorded(t, is, m)
		})

		phone := login(t, is, email, strongPassword, "phone")
		secrets.tokens(phone)
		var resetTok string

		t.Run("the reset mail goes to registered addresses only", func(t *testing.T) {
			unknown := uniqueEmail()
			r1 := forgot(t, is, unknown)
			// The unknown address's background work has committed (its
			// audit entry is there) before the known one is even asked
			// for: a mail it had queued would be older than the known
			// one's, and the worker sends the older first.
			waitAudit(t, st, unknown)
			r2 := forgot(t, is, email)
			wantStatus(t, "forgot (unknown)", r1, http.StatusAccepted)
			wantStatus(t, "forgot (known)", r2, http.StatusAccepted)
			if !bytes.Equal(r1.body, r2.body) {
				t.Errorf("forgot bodies differ: unknown %q, known %q", r1.body, r2.body)
			}
			m := waitMail(t, srv, email, base, "/reset-password")
			if m.Subject != "Reset your password" {
				t.Errorf("reset mail subject = %q", m.Subject)
			}
			resetTok = mailToken(t, m, base, "/reset-password")
			secrets.add(resetTok)
			waitRecorded(t, is, m)
			assertQueueEmpty(t, st)
			for _, got := range srv.Messages() {
				if mailtest.To(unknown)(got) {
					t.Errorf("a mail went to the unregistered address %s: %q", unknown, got.Subject)
				}
			}
			if n := len(srv.Messages()); n != 2 {
				t.Errorf("the SMTP server got %d mails, want 2 (verification and reset)", n)
			}
		})

		t.Run("the reset token works once and ends every session", func(t *testing.T) {
			if resetTok == "" {
				t.Skip("no reset mail")
			}
			const newPassword = "an entirely new passphrase"
			reset := func() response {
				return do(t, "POST", is.base+"/v1/password/reset", map[string]string{"token": resetTok, "new_password": newPassword})
			}
			wantStatus(t, "reset", reset(), http.StatusNoContent)
			wantProblem(t, "second use of the reset token", reset(), http.StatusBadRequest, "invalid_reset_token")
			for name, rt := range map[string]string{"laptop": laptop.Refresh, "phone": phone.Refresh} {
				wantProblem(t, "refresh of the "+name+" session after the reset", refresh(t, is, rt), http.StatusUnauthorized, "refresh_token_revoked")
			}
			wantProblem(t, "login with the old password", do(t, "POST", is.base+"/v1/login",
				map[string]string{"email": email, "password": strongPassword}), http.StatusUnauthorized, "invalid_credentials")
			secrets.tokens(login(t, is, email, newPassword, "laptop"))
		})

		t.Run("no token in the logs in smtp mode", func(t *testing.T) {
			secrets.assertAbsent(t, "issuer log", is.logs.String())
		})
	})
}

// waitAudit waits until the issuer has recorded the forgot-password
// request for an address without an account.
func waitAudit(t *testing.T, st store.Store, email string) {
	t.Helper()
	waitAuditN(t, st, email, 1)
}

// waitAuditN waits until the issuer has recorded n forgot-password
// requests for an address without an account.
func waitAuditN(t testing.TB, st store.Store, email string, n int) {
	t.Helper()
	deadline := time.Now().Add(mailWait)
	for {
		evs, err := st.ListAudit(context.Background(), store.AuditFilter{Type: auth.EventPasswordResetRequested, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range evs {
			var d map[string]any
			if json.Unmarshal(e.Data, &d) == nil && d["email"] == strings.ToLower(email) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s audit entries for %s, want %d", got, auth.EventPasswordResetRequested, email, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMailResetTokenExpires runs the issuer with a short reset-link
// lifetime: once the link's stored expiry has passed, it is refused.
func TestMailResetTokenExpires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const ttl = 3 * time.Second
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr(), "--reset-token-ttl", ttl.String())...)
		st := openStore(t, dbURL)
		email := uniqueEmail()
		register(t, is, email)
		wantStatus(t, "forgot", forgot(t, is, email), http.StatusAccepted)
		tok := mailToken(t, waitMail(t, srv, email, "http://issuer.test", "/reset-password"), "http://issuer.test", "/reset-password")

		ot, err := st.OneTimeTokenByHash(context.Background(), token.Hash(tok))
		if err != nil {
			t.Fatalf("the mailed token is not stored: %v", err)
		}
		if got := ot.ExpiresAt.Sub(ot.CreatedAt); got != ttl {
			t.Errorf("stored lifetime = %s, want %s", got, ttl)
		}
		// Wait for the stored expiry itself, a known instant.
		for d := time.Until(ot.ExpiresAt); d > 0; d = time.Until(ot.ExpiresAt) {
			time.Sleep(d)
		}
		wantProblem(t, "reset with an expired token", do(t, "POST", is.base+"/v1/password/reset",
			map[string]string{"token": tok, "new_password": "an entirely new passphrase"}), http.StatusBadRequest, "invalid_reset_token")
		login(t, is, email, strongPassword, "laptop") // the password did not change
	})
}

// TestMailSMTPDown: a mail queued while the SMTP server is down is
// delivered once a server listens on that address again.
func TestMailSMTPDown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		addr := mailtest.FreeAddr(t)
		is := startIssuer(t, dbURL, smtpFlags(addr, "--mail-retry-backoff", "200ms")...)
		email := uniqueEmail()
		register(t, is, email)
		if _, ok := is.logs.waitFor(time.Now().Add(mailWait), func(l string) bool {
			return logLine(l, "mail delivery failed; will retry", map[string]string{"kind": store.PurposeVerifyEmail})
		}); !ok {
			t.Fatal("the issuer never reported a failed delivery while the SMTP server was down")
		}
		srv := mailtest.Start(t, mailtest.Options{Addr: addr})
		tok := mailToken(t, waitMail(t, srv, email, "http://issuer.test", "/verify-email"), "http://issuer.test", "/verify-email")
		wantStatus(t, "verify", do(t, "POST", is.base+"/v1/email/verify", map[string]string{"token": tok}), http.StatusNoContent)
	})
}

// TestMailSurvivesCrash: a mail queued by an issuer that is then killed
// (SIGKILL: no shutdown at all) is delivered by the next issuer started
// over the same database.
func TestMailSurvivesCrash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		addr := mailtest.FreeAddr(t)
		flags := smtpFlags(addr, "--mail-retry-backoff", "1s", "--mail-poll-interval", "200ms")
		first := startIssuer(t, dbURL, flags...)
		email := uniqueEmail()
		register(t, first, email)
		// The SMTP server is not there yet, so the mail stays queued.
		if _, ok := first.logs.waitFor(time.Now().Add(mailWait), func(l string) bool {
			return logLine(l, "mail delivery failed; will retry", map[string]string{"kind": store.PurposeVerifyEmail})
		}); !ok {
			t.Fatal("the first issuer never tried the mail")
		}
		if err := first.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-first.exited

		srv := mailtest.Start(t, mailtest.Options{Addr: addr})
		second := startIssuerWithKEK(t, dbURL, first.kek, flags...)
		tok := mailToken(t, waitMail(t, srv, email, "http://issuer.test", "/verify-email"), "http://issuer.test", "/verify-email")
		wantStatus(t, "verify", do(t, "POST", second.base+"/v1/email/verify", map[string]string{"token": tok}), http.StatusNoContent)
		if _, ok := second.logs.waitFor(time.Now().Add(mailWait), func(l string) bool {
			return logLine(l, "mail sent", map[string]string{"kind": store.PurposeVerifyEmail})
		}); !ok {
			t.Error("the second issuer did not record the delivery")
		}
	})
}

// TestForgotPasswordIndistinguishable: known and unknown addresses get the
// same status, headers that matter and byte-identical bodies, and only the
// known address gets a mail. That the answer is complete before any lookup
// is asserted in internal/auth (TestForgotPasswordAnswersBeforeAnyLookup);
// the latency comparison is BenchmarkForgotPasswordLatency, since a timed
// assertion cannot pass every time on a shared machine.
func TestForgotPasswordIndistinguishable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr())...)
		st := openStore(t, dbURL)
		known, unknown := uniqueEmail(), uniqueEmail()
		register(t, is, known)
		waitRecorded(t, is, waitMail(t, srv, known, "http://issuer.test", "/verify-email"))

		k, u := forgot(t, is, known), forgot(t, is, unknown)
		wantStatus(t, "forgot(known)", k, http.StatusAccepted)
		if u.status != k.status || !bytes.Equal(u.body, k.body) {
			t.Fatalf("forgot(unknown) = %d %q, forgot(known) = %d %q: want the same answer", u.status, u.body, k.status, k.body)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control"} {
			if k.header.Get(h) != u.header.Get(h) {
				t.Errorf("forgot header %s: known %q, unknown %q, want the same", h, k.header.Get(h), u.header.Get(h))
			}
		}
		waitRecorded(t, is, waitMail(t, srv, known, "http://issuer.test", "/reset-password"))
		waitAudit(t, st, unknown)
		if got := len(srv.Messages()); got != 2 {
			t.Errorf("the SMTP server got %d mails, want 2 (the verification and one reset; none for the unknown address)", got)
		}
	})
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestMailVerificationRequired runs the issuer with --require-verified-email:
// login is refused until the address is verified, and only after a correct
// password; resend is authenticated and sends nothing while the last
// verification mail is under a minute old or the address is verified.
func TestMailVerificationRequired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "http://issuer.test"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr(), "--require-verified-email")...)
		st := openStore(t, dbURL)
		email := uniqueEmail()
		register(t, is, email)
		loginAs := func(password string) response {
			return do(t, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": password})
		}
		wantProblem(t, "login before verification", loginAs(strongPassword), http.StatusForbidden, "email_not_verified")
		wantProblem(t, "wrong password before verification", loginAs("not the password at all"), http.StatusUnauthorized, "invalid_credentials")

		resend := func(headers ...string) response {
			return do(t, "POST", is.base+"/v1/email/verify/resend", nil, headers...)
		}
		wantProblem(t, "resend without a token", resend(), http.StatusUnauthorized, "invalid_token")

		m := waitMail(t, srv, email, base, "/verify-email")
		waitRecorded(t, is, m)
		wantStatus(t, "verify", do(t, "POST", is.base+"/v1/email/verify", map[string]string{"token": mailToken(t, m, base, "/verify-email")}), http.StatusNoContent)
		tk := login(t, is, email, strongPassword, "laptop")
		wantStatus(t, "resend once verified", resend(bearer(tk.Access)...), http.StatusAccepted)
		// Resend is synchronous: anything it queued is in the queue now.
		assertQueueEmpty(t, st)
		if n := len(srv.Messages()); n != 1 {
			t.Errorf("the SMTP server got %d mails, want only the verification mail of the registration", n)
		}
	})
}

// TestMailForgotIdempotent: a forgot-password request repeated with the same
// Idempotency-Key is answered from the first one and queues no second mail;
// another key is another request.
func TestMailForgotIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "http://issuer.test"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr())...)
		st := openStore(t, dbURL)
		email := uniqueEmail()
		register(t, is, email)
		waitRecorded(t, is, waitMail(t, srv, email, base, "/verify-email"))

		forgotKey := func(key string) response {
			return do(t, "POST", is.base+"/v1/password/forgot", map[string]string{"email": email}, "Idempotency-Key", key)
		}
		first, again := forgotKey("forgot-1"), forgotKey("forgot-1")
		wantStatus(t, "forgot", first, http.StatusAccepted)
		wantStatus(t, "forgot again with the same key", again, http.StatusAccepted)
		if !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay = %q (Idempotent-Replayed %q), want %q replayed", again.body, again.header.Get("Idempotent-Replayed"), first.body)
		}
		wantProblem(t, "same key, other body", do(t, "POST", is.base+"/v1/password/forgot",
			map[string]string{"email": uniqueEmail()}, "Idempotency-Key", "forgot-1"), http.StatusUnprocessableEntity, "idempotency_key_reused")
		isReset := func(m mailtest.Message) bool {
			return mailtest.To(email)(m) && strings.Contains(m.Text, "/reset-password?token=")
		}
		// The first key's mail is out before the second key is used, so
		// the second link is the newer one.
		waitRecorded(t, is, srv.WaitN(t, mailWait, 1, isReset)[0])
		wantStatus(t, "forgot with another key", forgotKey("forgot-2"), http.StatusAccepted)
		resets := srv.WaitN(t, mailWait, 2, isReset)
		waitRecorded(t, is, resets[1])
		// Every request's background work has finished: the last reset
		// mail was sent, so the requests before it were processed too.
		assertQueueEmpty(t, st)
		if n := len(srv.Messages()); n != 3 {
			t.Errorf("the SMTP server got %d mails, want 3 (verification, one reset per key)", n)
		}
		// The newer reset link replaced the older one.
		tokA, tokB := mailToken(t, resets[0], base, "/reset-password"), mailToken(t, resets[1], base, "/reset-password")
		reset := func(tok string) response {
			return do(t, "POST", is.base+"/v1/password/reset", map[string]string{"token": tok, "new_password": "an entirely new passphrase"})
		}
		wantProblem(t, "reset with the replaced link", reset(tokA), http.StatusBadRequest, "invalid_reset_token")
		wantStatus(t, "reset with the newest link", reset(tokB), http.StatusNoContent)
	})
}
