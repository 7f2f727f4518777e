package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateMail(t *testing.T) {
	smtp := func(url string) func(*Issuer) {
		return func(c *Issuer) { c.MailMode, c.SMTPURL = MailModeSMTP, url }
	}
	tests := []struct {
		name   string
		mutate func(*Issuer)
		want   string // the flag the error names; "" for a valid setting
	}{
		{"log mode default", func(*Issuer) {}, ""},
		{"smtp with STARTTLS", smtp("smtp://mail.example.com:587"), ""},
		{"smtp without port", smtp("smtp://mail.example.com"), ""},
		{"smtp with auth", smtp("smtp://user:p%40ss@mail.example.com:587"), ""},
		{"smtps", smtp("smtps://mail.example.com:465"), ""},
		{"smtp loopback", smtp("smtp://127.0.0.1:1025"), ""},
		{"smtp ipv6 loopback", smtp("smtp://[::1]:25"), ""},
		{"smtp trailing slash", smtp("smtp://mail.example.com:25/"), ""},
		{"unknown mode", func(c *Issuer) { c.MailMode = "sendmail" }, "--mail-mode"},
		{"smtp without url", smtp(""), "--smtp-url"},
		{"smtp wrong scheme", smtp("http://mail.example.com"), "--smtp-url"},
		{"smtp no host", smtp("smtp://:25"), "--smtp-url"},
		{"smtp bad port", smtp("smtp://mail.example.com:0"), "--smtp-url"},
		{"smtp port too large", smtp("smtp://mail.example.com:65536"), "--smtp-url"},
		{"smtp path", smtp("smtp://mail.example.com:25/relay"), "--smtp-url"},
		{"smtp query", smtp("smtp://mail.example.com:25?tls=no"), "--smtp-url"},
		{"smtp without from", func(c *Issuer) { smtp("smtp://mail.example.com")(c); c.MailFrom = "" }, "--mail-from"},
		{"from not an address", func(c *Issuer) { c.MailFrom = "Palisade" }, "--mail-from"},
		{"public url relative", func(c *Issuer) { c.PublicURL = "/app" }, "--public-url"},
		{"public url query", func(c *Issuer) { c.PublicURL = "https://app.example.com/?x=1" }, "--public-url"},
		{"public url ok", func(c *Issuer) { c.PublicURL = "https://app.example.com/account" }, ""},
		{"smtp timeout short", func(c *Issuer) { c.SMTPTimeout = 999 * time.Millisecond }, "--smtp-timeout"},
		{"smtp timeout long", func(c *Issuer) { c.SMTPTimeout = 11 * time.Minute }, "--smtp-timeout"},
		{"max attempts zero", func(c *Issuer) { c.MailMaxAttempts = 0 }, "--mail-max-attempts"},
		{"max attempts large", func(c *Issuer) { c.MailMaxAttempts = 101 }, "--mail-max-attempts"},
		{"max attempts one", func(c *Issuer) { c.MailMaxAttempts = 1 }, ""},
		{"backoff zero", func(c *Issuer) { c.MailRetryBackoff = 0 }, "--mail-retry-backoff"},
		{"backoff long", func(c *Issuer) { c.MailRetryBackoff = 2 * time.Hour }, "--mail-retry-backoff"},
		{"backoff short ok", func(c *Issuer) { c.MailRetryBackoff = 10 * time.Millisecond }, ""},
		{"poll zero", func(c *Issuer) { c.MailPollInterval = 0 }, "--mail-poll-interval"},
		{"poll long", func(c *Issuer) { c.MailPollInterval = 2 * time.Hour }, "--mail-poll-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t)
			tt.mutate(c)
			err := c.ValidateServe()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateServe() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateServe() = %v, want an error naming %s", err, tt.want)
			}
			// Mail settings belong to serve only.
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateSMTPURLHidesPassword(t *testing.T) {
	c := defaults(t)
	c.MailMode, c.SMTPURL = MailModeSMTP, "smtp://user:hunter2@mail.example.com:25/x"
	err := c.ValidateServe()
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ValidateServe() = %v, want an error that does not contain the password", err)
	}
}

func TestLinkBase(t *testing.T) {
	tests := []struct {
		issuer, public, want string
	}{
		{"http://localhost:8080", "", "http://localhost:8080"},
		{"https://auth.example.com", "https://app.example.com", "https://app.example.com"},
		{"https://auth.example.com", "https://app.example.com/account/", "https://app.example.com/account"},
	}
	for _, tt := range tests {
		c := Issuer{Tokens: Tokens{IssuerURL: tt.issuer}, Mail: Mail{PublicURL: tt.public}}
		if got := c.LinkBase(); got != tt.want {
			t.Errorf("LinkBase(issuer %q, public %q) = %q, want %q", tt.issuer, tt.public, got, tt.want)
		}
	}
}
