package mail_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/mail"
	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
)

func TestComposeNotice(t *testing.T) {
	at := time.Date(2026, time.November, 23, 20, 1, 2, 345678000, time.FixedZone("CET", 3600))
	long := strings.Repeat("é", 150) // 300 bytes
	tests := []struct {
		kind, name  string
		n           auth.Notice
		wantSubject string
		wantIn      []string
	}{
		{store.MailPasswordChanged, "Ada", auth.Notice{At: at, IP: "203.0.113.7", UserAgent: "Firefox/132.0"}, "Your password was changed",
			[]string{"Hello Ada,", "ada@example.com", "was changed", "2026-11-23 19:01:02 UTC", "203.0.113.7", "Firefox/132.0", "Forgot password", "contact support"}},
		{store.MailPasswordReset, "", auth.Notice{At: at, IP: "2001:db8::1"}, "Your password was reset",
			[]string{"Hello,", "was reset", "2026-11-23 19:01:02 UTC", "2001:db8::1", "unknown", "Forgot password", "contact support"}},
		{store.MailPasswordChanged, "Grace <Hopper>", auth.Notice{At: at, UserAgent: `<a href="https://evil.example">x</a>`}, "Your password was changed",
			[]string{"Hello Grace", "unknown"}},
		{store.MailPasswordReset, "", auth.Notice{At: at, UserAgent: long}, "Your password was reset",
			[]string{strings.Repeat("é", 100) + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.name, func(t *testing.T) {
			m, err := mail.ComposeNotice(tt.kind, "ada@example.com", tt.name, tt.n)
			if err != nil {
				t.Fatalf("ComposeNotice = %v", err)
			}
			if m.Subject != tt.wantSubject || m.To != "ada@example.com" || m.ToName != tt.name || m.Link != "" {
				t.Errorf("ComposeNotice: subject %q to %q name %q link %q, want %q ada@example.com %q and no link", m.Subject, m.To, m.ToName, m.Link, tt.wantSubject, tt.name)
			}
			for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
				for _, w := range tt.wantIn {
					if !strings.Contains(body, w) {
						t.Errorf("%s part lacks %q:\n%s", part, w, body)
					}
				}
				if strings.Contains(body, "token=") || strings.Contains(body, "https://") && !strings.Contains(tt.n.UserAgent, "https://") {
					t.Errorf("%s part carries a link:\n%s", part, body)
				}
			}
			if strings.Contains(m.HTML, "<Hopper>") || strings.Contains(m.HTML, `<a href="https://evil.example">`) {
				t.Errorf("html part does not escape the name or the user agent:\n%s", m.HTML)
			}
			if strings.Contains(m.Text, strings.Repeat("é", 101)) {
				t.Errorf("text part quotes more than 200 bytes of the user agent")
			}
		})
	}
	for _, kind := range []string{"newsletter", store.PurposePasswordReset} {
		if _, err := mail.ComposeNotice(kind, "a@example.com", "", auth.Notice{At: at}); err == nil {
			t.Errorf("ComposeNotice(%q) = nil error, want an error (not a notice)", kind)
		}
	}
	if _, err := mail.Compose(store.MailPasswordChanged, "https://a.example", "a@example.com", "", tok, 0); err == nil {
		t.Error("Compose(a notice kind) = nil error, want an error (a notice has no link)")
	}
	if _, err := mail.Link(store.MailPasswordReset, "https://a.example", tok); err == nil {
		t.Error("Link(a notice kind) = nil error, want an error (a notice has no link)")
	}
}

// TestWorkerSendsNotices: a notice has no link and no token, and is sent
// however late its turn comes, never dropped as a stale link; a notice
// whose facts cannot be read is given up, not retried.
func TestWorkerSendsNotices(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, mailtest.Options{}, mail.Config{})
		queued := f.clock.Now().UTC()
		enqueue := func(kind, to string, notice []byte) {
			t.Helper()
			if err := f.st.EnqueueMail(ctx, store.MailJob{
				ID: uuid.Must(uuid.NewV7()).String(), Kind: kind, To: to, Name: "Ada", Notice: notice, CreatedAt: queued, NextAttemptAt: queued,
			}); err != nil {
				t.Fatal(err)
			}
		}
		facts, err := json.Marshal(auth.Notice{At: queued, IP: "198.51.100.4", UserAgent: "curl/8.5.0"})
		if err != nil {
			t.Fatal(err)
		}
		enqueue(store.MailPasswordChanged, "ada@example.com", facts)
		enqueue(store.MailPasswordReset, "grace@example.com", facts)
		enqueue(store.MailPasswordReset, "broken@example.com", []byte("not json"))
		f.clock.Advance(72 * time.Hour) // longer than any link lives
		f.drain(t)

		for _, c := range []struct{ to, subject string }{
			{"ada@example.com", "Your password was changed"},
			{"grace@example.com", "Your password was reset"},
		} {
			m := f.smtp.Wait(t, 5*time.Second, mailtest.To(c.to))
			when := queued.Format("2006-01-02 15:04:05 UTC")
			if m.Subject != c.subject || !strings.Contains(m.Text, when) || !strings.Contains(m.HTML, "198.51.100.4") || !strings.Contains(m.Text, "curl/8.5.0") {
				t.Errorf("notice to %s: subject %q, want %q stating %s, 198.51.100.4 and curl/8.5.0:\n%s", c.to, m.Subject, c.subject, when, m.Text)
			}
		}
		if n := len(f.smtp.Messages()); n != 2 {
			t.Errorf("server got %d mails, want the 2 readable notices", n)
		}
		for kind, want := range map[string]float64{store.MailPasswordChanged: 1, store.MailPasswordReset: 1} {
			if got := f.counter(t, "issuer_mails_sent_total", kind); got != want {
				t.Errorf("issuer_mails_sent_total{kind=%s} = %v, want %v", kind, got, want)
			}
			if got := f.counter(t, "issuer_mails_dropped_total", kind); got != 0 {
				t.Errorf("issuer_mails_dropped_total{kind=%s} = %v, want 0: a notice has no link to go stale", kind, got)
			}
		}
		if got := f.counter(t, "issuer_mails_failed_total", store.MailPasswordReset); got != 1 {
			t.Errorf("issuer_mails_failed_total{kind=%s} = %v, want 1 (the unreadable notice)", store.MailPasswordReset, got)
		}
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails pending, want 0", n)
		}
	})
}
