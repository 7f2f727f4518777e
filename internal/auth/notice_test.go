package auth_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// notices claims the queued notice mails (every mail without a link).
func (f *fixture) notices(t *testing.T) []store.MailJob {
	t.Helper()
	f.svc.Wait()
	// Leased for good: a later call sees only what was queued since.
	jobs, err := f.st.ClaimMail(context.Background(), f.clock.Now().Add(time.Hour), 100, 1000*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.MailJob
	for _, j := range jobs {
		if j.Kind == store.MailPasswordChanged || j.Kind == store.MailPasswordReset {
			out = append(out, j)
		}
	}
	return out
}

// wantNotice checks that jobs is exactly one notice of kind to email,
// reporting when and from where, and carrying no token.
func wantNotice(t *testing.T, what string, jobs []store.MailJob, kind, email string, at time.Time, m auth.Meta) {
	t.Helper()
	if len(jobs) != 1 {
		t.Fatalf("%s: %d notices queued, want 1", what, len(jobs))
	}
	j := jobs[0]
	if j.Kind != kind || j.To != email || len(j.SealedToken) != 0 {
		t.Errorf("%s: notice kind %q to %q with %d bytes of sealed token, want %q to %q without a token", what, j.Kind, j.To, len(j.SealedToken), kind, email)
	}
	var n auth.Notice
	if err := json.Unmarshal(j.Notice, &n); err != nil {
		t.Fatalf("%s: notice %q: %v", what, j.Notice, err)
	}
	if want := (auth.Notice{At: at, IP: m.IP, UserAgent: m.UserAgent}); !n.At.Equal(want.At) || n.IP != want.IP || n.UserAgent != want.UserAgent {
		t.Errorf("%s: notice = %+v, want %+v", what, n, want)
	}
}

// TestPasswordNotices: a password change and a password reset each queue,
// in their transaction, one mail to the owner saying when and from which
// client; a refused change queues none.
func TestPasswordNotices(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		u := f.user(t, "notice@example.com")
		f.notices(t) // the registration's verification mail is not one
		m := auth.Meta{IP: "203.0.113.7", UserAgent: "Firefox/132.0", RequestID: "req-1"}

		err := f.svc.ChangePassword(ctx, u.ID, "", auth.ChangePasswordInput{Current: "not the password at all", New: "a brand new passphrase"}, m)
		wantCode(t, "ChangePassword(wrong current)", err, "current_password_incorrect")
		err = f.svc.ChangePassword(ctx, u.ID, "", auth.ChangePasswordInput{Current: pw, New: "short"}, m)
		wantCode(t, "ChangePassword(weak new)", err, "validation_failed")
		if n := f.notices(t); len(n) != 0 {
			t.Fatalf("refused changes queued %d notices, want none", len(n))
		}

		f.clock.Advance(time.Minute)
		if err := f.svc.ChangePassword(ctx, u.ID, "", auth.ChangePasswordInput{Current: pw, New: "a brand new passphrase"}, m); err != nil {
			t.Fatalf("ChangePassword = %v", err)
		}
		wantNotice(t, "after a change", f.notices(t), store.MailPasswordChanged, "notice@example.com", f.clock.Now(), m)

		f.clock.Advance(time.Minute)
		if err := f.forgot("notice@example.com"); err != nil {
			t.Fatal(err)
		}
		tok := f.mailedToken(t, store.PurposePasswordReset, "notice@example.com")
		reset := auth.Meta{IP: "2001:db8::1", UserAgent: "curl/8.5.0"}
		if _, err := f.svc.ResetPassword(ctx, tok, "another brand new passphrase", reset); err != nil {
			t.Fatalf("ResetPassword = %v", err)
		}
		wantNotice(t, "after a reset", f.notices(t), store.MailPasswordReset, "notice@example.com", f.clock.Now(), reset)
		if _, err := f.svc.ResetPassword(ctx, tok, "yet another brand new passphrase", reset); err == nil {
			t.Fatal("ResetPassword(used token) = nil, want an error")
		}
		if n := f.notices(t); len(n) != 0 {
			t.Errorf("a refused reset queued %d notices, want none", len(n))
		}
	})
}
