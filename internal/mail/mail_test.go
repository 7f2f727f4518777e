package mail_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail"
	"github.com/palisade-auth/palisade/internal/store"
)

// A token as token.NewOpaque makes them: 43 characters of base64url.
const tok = "q3Vb-_x9ZcT1mQ0aLk2Jv8wR4sYbN6pH5eUoIfDgCtA"

func TestLink(t *testing.T) {
	tests := []struct {
		kind, base, token, want string
	}{
		{store.PurposePasswordReset, "https://app.example.com", tok, "https://app.example.com/reset-password?token=" + tok},
		{store.PurposeVerifyEmail, "https://app.example.com", tok, "https://app.example.com/verify-email?token=" + tok},
		{store.PurposeVerifyEmail, "https://app.example.com/", tok, "https://app.example.com/verify-email?token=" + tok},
		{store.PurposePasswordReset, "http://localhost:8080/tenant", tok, "http://localhost:8080/tenant/reset-password?token=" + tok},
		// Not a token the issuer makes, but escaping must hold anyway.
		{store.PurposePasswordReset, "https://a.example", "a+b/c=&d", "https://a.example/reset-password?token=a%2Bb%2Fc%3D%26d"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.base, func(t *testing.T) {
			got, err := mail.Link(tt.kind, tt.base, tt.token)
			if err != nil || got != tt.want {
				t.Errorf("Link(%q, %q, %q) = %q, %v, want %q", tt.kind, tt.base, tt.token, got, err, tt.want)
			}
		})
	}
	if _, err := mail.Link("newsletter", "https://a.example", tok); err == nil {
		t.Error(`Link("newsletter") = nil error, want an unknown-kind error`)
	}
}

func TestCompose(t *testing.T) {
	tests := []struct {
		kind, name  string
		ttl         time.Duration
		wantSubject string
		wantGreet   string
		wantIn      []string
	}{
		{store.PurposePasswordReset, "Ada", 30 * time.Minute, "Reset your password", "Hello Ada,", []string{"30 minutes", "ada@example.com"}},
		{store.PurposePasswordReset, "", time.Hour, "Reset your password", "Hello,", []string{"1 hour"}},
		{store.PurposeVerifyEmail, "Grace <Hopper>", 48 * time.Hour, "Verify your email address", "Hello Grace", []string{"48 hours"}},
		{store.PurposeVerifyEmail, "", 7 * 24 * time.Hour, "Verify your email address", "Hello,", []string{"7 days"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.name, func(t *testing.T) {
			m, err := mail.Compose(tt.kind, "https://app.example.com", "ada@example.com", tt.name, tok, tt.ttl)
			if err != nil {
				t.Fatalf("Compose = %v", err)
			}
			link, _ := mail.Link(tt.kind, "https://app.example.com", tok)
			if m.Subject != tt.wantSubject || m.Link != link || m.To != "ada@example.com" || m.ToName != tt.name {
				t.Errorf("Compose: subject %q link %q to %q name %q, want %q %q ada@example.com %q", m.Subject, m.Link, m.To, m.ToName, tt.wantSubject, link, tt.name)
			}
			for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
				if !strings.Contains(body, link) {
					t.Errorf("%s part lacks the link %s:\n%s", part, link, body)
				}
				if !strings.Contains(body, tt.wantGreet) {
					t.Errorf("%s part lacks the greeting %q:\n%s", part, tt.wantGreet, body)
				}
				for _, w := range tt.wantIn {
					if !strings.Contains(body, w) {
						t.Errorf("%s part lacks %q:\n%s", part, w, body)
					}
				}
			}
			if !strings.Contains(m.HTML, `href="`+link+`"`) {
				t.Errorf("html part has no anchor to the link:\n%s", m.HTML)
			}
			if tt.name == "Grace <Hopper>" && (strings.Contains(m.HTML, "<Hopper>") || !strings.Contains(m.HTML, "Grace &lt;Hopper&gt;")) {
				t.Errorf("html part does not escape the name:\n%s", m.HTML)
			}
		})
	}
	if _, err := mail.Compose("newsletter", "https://a.example", "a@example.com", "", tok, 0); err == nil {
		t.Error(`Compose("newsletter") = nil error, want an unknown-kind error`)
	}
}

func TestLogSender(t *testing.T) {
	var buf bytes.Buffer
	s := mail.NewLogSender(slog.New(slog.NewJSONHandler(&buf, nil)))
	m, err := mail.Compose(store.PurposeVerifyEmail, "http://localhost:8080", "ada@example.com", "Ada", tok, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m.ID = "job-1"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send = %v", err)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q is not JSON: %v", buf.String(), err)
	}
	if line["level"] != "INFO" || line["link"] != m.Link || line["to"] != "ada@example.com" || line["mail_id"] != "job-1" ||
		!strings.Contains(line["text"].(string), m.Link) {
		t.Errorf("log line = %v, want info with the link %s, the recipient, the id and the text", line, m.Link)
	}
}
