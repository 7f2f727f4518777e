package mail_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/palisade-auth/palisade/internal/mail"
	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
)

// testPKI is a CA and a server certificate it issued for the test hosts.
type testPKI struct {
	server *tls.Config // for the SMTP server
	client *tls.Config // trusts the CA
}

func newPKI(t *testing.T, hosts ...string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		server: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		client: &tls.Config{RootCAs: pool},
	}
}

// via dials addr whatever address the sender asks for: it puts a named,
// non-loopback host on a loopback listener.
func via(addr string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testMessage(t *testing.T, kind string) mail.Message {
	t.Helper()
	m, err := mail.Compose(kind, "https://app.example.com", "ada@example.com", "Ada Lovelace", tok, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m.ID, m.Date = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return m
}

// TestSMTPDelivers sends real mails to a real SMTP server over each
// transport the sender supports and reads them back as a mail client would.
func TestSMTPDelivers(t *testing.T) {
	pki := newPKI(t, "mail.example.com", "127.0.0.1", "localhost")
	tests := []struct {
		name     string
		server   mailtest.Options
		url      func(addr string) string
		opts     func(addr string) mail.SMTPOptions
		wantTLS  bool
		wantUser string
	}{
		{
			name:   "loopback without TLS",
			server: mailtest.Options{},
			url:    func(addr string) string { return "smtp://" + addr },
		},
		{
			name:   "localhost by name without TLS",
			server: mailtest.Options{},
			url:    func(addr string) string { return "smtp://localhost:" + portOf(t, addr) },
			opts:   func(addr string) mail.SMTPOptions { return mail.SMTPOptions{Dial: via(addr)} },
		},
		{
			name:    "loopback uses STARTTLS when offered",
			server:  mailtest.Options{TLSConfig: pki.server},
			url:     func(addr string) string { return "smtp://" + addr },
			opts:    func(string) mail.SMTPOptions { return mail.SMTPOptions{TLSConfig: pki.client} },
			wantTLS: true,
		},
		{
			name:    "remote host with STARTTLS",
			server:  mailtest.Options{TLSConfig: pki.server},
			url:     func(string) string { return "smtp://mail.example.com:587" },
			opts:    func(addr string) mail.SMTPOptions { return mail.SMTPOptions{TLSConfig: pki.client, Dial: via(addr)} },
			wantTLS: true,
		},
		{
			name:    "remote host with implicit TLS",
			server:  mailtest.Options{TLSConfig: pki.server, Implicit: true},
			url:     func(string) string { return "smtps://mail.example.com" },
			opts:    func(addr string) mail.SMTPOptions { return mail.SMTPOptions{TLSConfig: pki.client, Dial: via(addr)} },
			wantTLS: true,
		},
		{
			name:     "loopback with AUTH",
			server:   mailtest.Options{Users: map[string]string{"mailer": "s3cret:pass"}},
			url:      func(addr string) string { return "smtp://mailer:s3cret%3Apass@" + addr },
			wantUser: "mailer",
		},
		{
			name:     "remote host with STARTTLS and AUTH",
			server:   mailtest.Options{TLSConfig: pki.server, Users: map[string]string{"mailer": "s3cret"}},
			url:      func(string) string { return "smtp://mailer:s3cret@mail.example.com:587" },
			opts:     func(addr string) mail.SMTPOptions { return mail.SMTPOptions{TLSConfig: pki.client, Dial: via(addr)} },
			wantTLS:  true,
			wantUser: "mailer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mailtest.Start(t, tt.server)
			var opts mail.SMTPOptions
			if tt.opts != nil {
				opts = tt.opts(srv.Addr())
			}
			s, err := mail.NewSMTP(tt.url(srv.Addr()), "Palisade <no-reply@auth.example.com>", opts)
			if err != nil {
				t.Fatalf("NewSMTP = %v", err)
			}
			m := testMessage(t, store.PurposePasswordReset)
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatalf("Send = %v", err)
			}
			got := srv.Wait(t, 10*time.Second, mailtest.To("ada@example.com"))
			if got.TLS != tt.wantTLS || got.User != tt.wantUser {
				t.Errorf("delivered with TLS %v as user %q, want TLS %v user %q", got.TLS, got.User, tt.wantTLS, tt.wantUser)
			}
			if got.Subject != m.Subject || got.From != "no-reply@auth.example.com" {
				t.Errorf("subject %q from %q, want %q from no-reply@auth.example.com", got.Subject, got.From, m.Subject)
			}
			if id := got.Header.Get("Message-Id"); id != "<"+m.ID+"@auth.example.com>" {
				t.Errorf("Message-ID = %q, want <%s@auth.example.com>", id, m.ID)
			}
			if to := got.Header.Get("To"); !strings.Contains(to, "Ada Lovelace") {
				t.Errorf("To = %q, want the recipient's name in it", to)
			}
			for part, body := range map[string]string{"text": got.Text, "html": got.HTML} {
				if !strings.Contains(body, m.Link) {
					t.Errorf("%s part lacks the link %s:\n%s", part, m.Link, body)
				}
			}
		})
	}
}

// TestSMTPRefuses checks that the sender refuses what the TLS policy
// forbids, and reports a server's refusal, a bad login and a stalled
// server as errors, without a mail arriving.
func TestSMTPRefuses(t *testing.T) {
	pki := newPKI(t, "mail.example.com", "127.0.0.1")
	other := newPKI(t, "mail.example.com") // a CA the sender does not trust
	tests := []struct {
		name    string
		server  mailtest.Options
		reject  *smtp.SMTPError
		url     string // %s is the server's port
		opts    func(addr string) mail.SMTPOptions
		stall   bool // the server holds the mail's content unanswered
		wantErr string
	}{
		{
			name:    "remote host without STARTTLS",
			server:  mailtest.Options{},
			url:     "smtp://mail.example.com:%s",
			opts:    func(addr string) mail.SMTPOptions { return mail.SMTPOptions{Dial: via(addr)} },
			wantErr: "STARTTLS",
		},
		{
			name:    "remote host without STARTTLS, with a password to protect",
			server:  mailtest.Options{Users: map[string]string{"mailer": "s3cret"}},
			url:     "smtp://mailer:s3cret@mail.example.com:%s",
			opts:    func(addr string) mail.SMTPOptions { return mail.SMTPOptions{Dial: via(addr)} },
			wantErr: "STARTTLS",
		},
		{
			name:    "remote host with an untrusted certificate",
			server:  mailtest.Options{TLSConfig: other.server},
			url:     "smtp://mail.example.com:%s",
			opts:    func(addr string) mail.SMTPOptions { return mail.SMTPOptions{TLSConfig: pki.client, Dial: via(addr)} },
			wantErr: "certificate",
		},
		{
			name:   "implicit TLS to a server speaking clear text",
			server: mailtest.Options{},
			url:    "smtps://127.0.0.1:%s",
			opts: func(string) mail.SMTPOptions {
				return mail.SMTPOptions{TLSConfig: pki.client, Timeout: 5 * time.Second}
			},
			wantErr: "",
		},
		{
			name:    "wrong password",
			server:  mailtest.Options{Users: map[string]string{"mailer": "s3cret"}},
			url:     "smtp://mailer:wrong@127.0.0.1:%s",
			wantErr: "AUTH",
		},
		{
			name:    "no login where one is required",
			server:  mailtest.Options{Users: map[string]string{"mailer": "s3cret"}},
			url:     "smtp://127.0.0.1:%s",
			wantErr: "authenticate",
		},
		{
			name:    "server refuses the mail",
			server:  mailtest.Options{},
			reject:  &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"},
			url:     "smtp://127.0.0.1:%s",
			wantErr: "try again later",
		},
		{
			name:    "server stalls past the timeout",
			stall:   true,
			url:     "smtp://127.0.0.1:%s",
			opts:    func(string) mail.SMTPOptions { return mail.SMTPOptions{Timeout: 500 * time.Millisecond} },
			wantErr: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stall chan struct{}
			if tt.stall {
				stall = make(chan struct{})
				tt.server.BeforeData = func() { <-stall }
			}
			srv := mailtest.Start(t, tt.server)
			if tt.stall {
				t.Cleanup(func() { close(stall) }) // runs before the server stops
			}
			srv.Reject(tt.reject)
			opts := mail.SMTPOptions{Timeout: 2 * time.Second}
			if tt.opts != nil {
				opts = tt.opts(srv.Addr())
				opts.Timeout = 2 * time.Second
			}
			url := strings.Replace(tt.url, "%s", portOf(t, srv.Addr()), 1)
			s, err := mail.NewSMTP(url, "no-reply@auth.example.com", opts)
			if err != nil {
				t.Fatalf("NewSMTP = %v", err)
			}
			// A stalled server holds the exchange until the test ends, so
			// Send can only return there through its timeout.
			err = s.Send(context.Background(), testMessage(t, store.PurposeVerifyEmail))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Send = %v, want an error containing %q", err, tt.wantErr)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Errorf("server accepted %d mails, want none", n)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q contains the SMTP password", err)
			}
		})
	}
}

func TestSMTPTLSPolicy(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"smtp://mail.example.com:587", true},
		{"smtp://user:pw@mail.example.com", true},
		{"smtp://10.0.0.7:25", true},
		{"smtp://192.168.1.1:25", true},
		{"smtps://mail.example.com", true},
		{"smtps://127.0.0.1:465", true},
		{"smtp://127.0.0.1:25", false},
		{"smtp://127.1.2.3:25", false},
		{"smtp://localhost:1025", false},
		{"smtp://LOCALHOST:1025", false},
		{"smtp://[::1]:25", false},
		{"smtp://localhost.example.com:25", true},
	}
	for _, tt := range tests {
		s, err := mail.NewSMTP(tt.url, "no-reply@example.com", mail.SMTPOptions{})
		if err != nil {
			t.Errorf("NewSMTP(%q) = %v", tt.url, err)
			continue
		}
		if got := s.TLSRequired(); got != tt.want {
			t.Errorf("NewSMTP(%q).TLSRequired() = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestNewSMTPInvalid(t *testing.T) {
	tests := []struct {
		name, url, from string
	}{
		{"scheme", "http://mail.example.com", "a@example.com"},
		{"no host", "smtp://:25", "a@example.com"},
		{"port", "smtp://mail.example.com:99999", "a@example.com"},
		{"port not a number", "smtp://user:s3cret@mail.example.com:x", "a@example.com"},
		{"from", "smtp://mail.example.com", "not an address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mail.NewSMTP(tt.url, tt.from, mail.SMTPOptions{})
			if err == nil {
				t.Fatalf("NewSMTP(%q, %q) = nil error, want one", tt.url, tt.from)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("NewSMTP error %q contains the password", err)
			}
		})
	}
}
