package config

import (
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Mail modes.
const (
	MailModeLog  = "log"
	MailModeSMTP = "smtp"
)

// Mail is how the issuer delivers account mails.
type Mail struct {
	MailMode             string
	SMTPURL              string
	SMTPTimeout          time.Duration
	MailFrom             string
	PublicURL            string
	MailMaxAttempts      int
	MailRetryBackoff     time.Duration
	MailPollInterval     time.Duration
	RequireVerifiedEmail bool
}

// Flags registers the mail flags.
func (m *Mail) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&m.MailMode, "mail-mode", MailModeLog, "log (mails, links included, go to the log: development only) or smtp")
	fs.StringVar(&m.SMTPURL, "smtp-url", "", "smtp://[user:pass@]host:port (STARTTLS, required unless the host is loopback) or smtps://... (implicit TLS)")
	fs.StringVar(&m.MailFrom, "mail-from", "Palisade <no-reply@localhost>", "From address of account mails")
	fs.StringVar(&m.PublicURL, "public-url", "", "base URL of the links in mails (default: --issuer-url)")
	fs.DurationVar(&m.SMTPTimeout, "smtp-timeout", 30*time.Second, "time allowed for one SMTP delivery (connect, TLS, AUTH and transfer)")
	fs.IntVar(&m.MailMaxAttempts, "mail-max-attempts", 10, "deliveries tried per mail before it is given up")
	fs.DurationVar(&m.MailRetryBackoff, "mail-retry-backoff", 30*time.Second, "wait after a mail's first failed delivery; it doubles with each further failure, up to 1h")
	fs.DurationVar(&m.MailPollInterval, "mail-poll-interval", 10*time.Second, "how often the mail queue is checked besides when a request queues a mail (mails of other replicas, retries, deliveries a crashed process left)")
	fs.BoolVar(&m.RequireVerifiedEmail, "require-verified-email", false, "refuse login (403 email_not_verified) until the email address is verified")
}

// Validate checks the part.
func (m *Mail) Validate() error {
	var p problems
	switch m.MailMode {
	case MailModeLog:
	case MailModeSMTP:
		// Never echo the URL: it may carry the SMTP password.
		if !validSMTPURL(m.SMTPURL) {
			p.addf("--smtp-url must be smtp://[user:pass@]host[:port] or smtps://[user:pass@]host[:port] with --mail-mode smtp")
		}
		if m.MailFrom == "" {
			p.addf("--mail-from is required with --mail-mode smtp")
		}
	default:
		p.addf("--mail-mode must be log or smtp, got %q", m.MailMode)
	}
	if m.MailFrom != "" {
		if _, err := mail.ParseAddress(m.MailFrom); err != nil {
			p.addf("--mail-from must be an address like \"Palisade <no-reply@example.com>\", got %q", m.MailFrom)
		}
	}
	if m.PublicURL != "" {
		if u, err := url.Parse(m.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			p.addf("--public-url must be an absolute http(s) URL without query or fragment, got %q", m.PublicURL)
		}
	}
	if m.SMTPTimeout < time.Second || m.SMTPTimeout > 10*time.Minute {
		p.addf("--smtp-timeout must be between 1s and 10m, got %s", m.SMTPTimeout)
	}
	if m.MailMaxAttempts < 1 || m.MailMaxAttempts > 100 {
		p.addf("--mail-max-attempts must be between 1 and 100, got %d", m.MailMaxAttempts)
	}
	if m.MailRetryBackoff < 10*time.Millisecond || m.MailRetryBackoff > time.Hour {
		p.addf("--mail-retry-backoff must be between 10ms and 1h, got %s", m.MailRetryBackoff)
	}
	if m.MailPollInterval < 10*time.Millisecond || m.MailPollInterval > time.Hour {
		p.addf("--mail-poll-interval must be between 10ms and 1h, got %s", m.MailPollInterval)
	}
	return p.err()
}

// validSMTPURL checks the shape of --smtp-url: scheme smtp or smtps, a
// host, an optional numeric port, nothing after it.
func validSMTPURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

// linkBase is the base of the links in mails: --public-url, else the
// issuer URL, without a trailing slash.
func (m *Mail) linkBase(issuerURL string) string {
	if m.PublicURL != "" {
		return strings.TrimSuffix(m.PublicURL, "/")
	}
	return strings.TrimSuffix(issuerURL, "/")
}

// MailLinks is how long the links in account mails work. The commands that
// may queue such a mail (serve, users create) register it.
type MailLinks struct {
	ResetTokenTTL  time.Duration
	VerifyTokenTTL time.Duration
}

// Flags registers the link lifetimes.
func (l *MailLinks) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&l.ResetTokenTTL, "reset-token-ttl", 30*time.Minute, "lifetime of password-reset links")
	fs.DurationVar(&l.VerifyTokenTTL, "verify-token-ttl", 48*time.Hour, "lifetime of email-verification links")
}
