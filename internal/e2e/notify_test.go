package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail/mailtest"
)

// noticeWhen is the time a notice states: "2006-01-02 15:04:05 UTC".
var noticeWhen = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`)

// wantNoticeMail checks a notice's content: what happened, when (between
// from and to), the client's address and user agent, what to do if it was
// not the owner, and no link or token.
func wantNoticeMail(t *testing.T, m mailtest.Message, subject, happened, email, userAgent string, from, to time.Time) {
	t.Helper()
	if m.Subject != subject {
		t.Errorf("notice subject = %q, want %q", m.Subject, subject)
	}
	for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
		for _, want := range []string{happened, email, "127.0.0.1", userAgent, "Forgot password", "contact support"} {
			if !strings.Contains(body, want) {
				t.Errorf("notice %q, %s part: lacks %q:\n%s", subject, part, want, body)
			}
		}
		if strings.Contains(body, "token=") || strings.Contains(body, "href=") {
			t.Errorf("notice %q, %s part: carries a link:\n%s", subject, part, body)
		}
		when, err := time.Parse("2006-01-02 15:04:05 UTC", noticeWhen.FindString(body))
		if err != nil || when.Before(from.Truncate(time.Second)) || when.After(to) {
			t.Errorf("notice %q, %s part: states the time %v (%v), want between %v and %v", subject, part, when, err, from, to)
		}
	}
}

// TestPasswordNotices runs the real issuer against a real SMTP server: a
// password change and a password reset each send the owner exactly one
// notice saying what happened, when, from which address and user agent, and
// what to do if it was not them; a refused change sends none.
func TestPasswordNotices(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		const base = "http://issuer.test"
		srv := mailtest.Start(t, mailtest.Options{})
		is := startIssuer(t, dbURL, smtpFlags(srv.Addr())...)
		st := openStore(t, dbURL)
		var secrets secretSet
		email := uniqueEmail()
		register(t, is, email)
		waitRecorded(t, is, waitMail(t, srv, email, base, "/verify-email"))
		tk := login(t, is, email, strongPassword, "laptop")
		secrets.tokens(tk)

		change := func(current, next, ua string) response {
			return do(t, "POST", is.base+"/v1/password/change", map[string]string{"current_password": current, "new_password": next},
				append(bearer(tk.Access), "User-Agent", ua)...)
		}
		wantProblem(t, "change with a wrong current password", change("not the password at all", "a brand new passphrase", "notice-test/1.0"),
			http.StatusForbidden, "current_password_incorrect")
		before := time.Now().UTC()
		wantStatus(t, "change", change(strongPassword, "a brand new passphrase", "notice-test/1.0 (change)"), http.StatusNoContent)
		after := time.Now().UTC()
		isChanged := func(m mailtest.Message) bool {
			return mailtest.To(email)(m) && m.Subject == "Your password was changed"
		}
		changed := srv.Wait(t, mailWait, isChanged)
		wantNoticeMail(t, changed, "Your password was changed", "was changed", email, "notice-test/1.0 (change)", before, after)
		waitRecorded(t, is, changed)

		wantStatus(t, "forgot", forgot(t, is, email), http.StatusAccepted)
		link := waitMail(t, srv, email, base, "/reset-password")
		tok := mailToken(t, link, base, "/reset-password")
		secrets.add(tok)
		before = time.Now().UTC()
		wantStatus(t, "reset", do(t, "POST", is.base+"/v1/password/reset",
			map[string]string{"token": tok, "new_password": "another brand new passphrase"}, "User-Agent", "notice-test/2.0 (reset)"), http.StatusNoContent)
		after = time.Now().UTC()
		isReset := func(m mailtest.Message) bool { return mailtest.To(email)(m) && m.Subject == "Your password was reset" }
		reset := srv.Wait(t, mailWait, isReset)
		wantNoticeMail(t, reset, "Your password was reset", "was reset", email, "notice-test/2.0 (reset)", before, after)
		waitRecorded(t, is, reset)

		// Everything queued has gone out: one notice of each, the refused
		// change none (it came before the change, so its notice would have
		// been sent before the change's).
		assertQueueEmpty(t, st)
		var notices []string
		for _, m := range srv.Messages() {
			if isChanged(m) || isReset(m) {
				notices = append(notices, m.Subject)
			}
		}
		if len(notices) != 2 {
			t.Errorf("notices sent = %q, want exactly one change and one reset notice", notices)
		}
		for _, m := range srv.Messages() {
			if isChanged(m) || isReset(m) {
				secrets.assertAbsent(t, "notice "+m.Subject, string(m.Raw))
			}
		}
	})
}
