package issuerapp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/mail"
)

// mailWorker builds the worker that delivers the queued account mails with
// the configured sender.
func (a *App) mailWorker(reg prometheus.Registerer) (*mail.Worker, error) {
	cfg := a.Cfg
	var sender mail.Sender
	switch cfg.MailMode {
	case config.MailModeSMTP:
		s, err := mail.NewSMTP(cfg.SMTPURL, cfg.MailFrom, mail.SMTPOptions{Timeout: cfg.SMTPTimeout})
		if err != nil {
			return nil, err
		}
		sender = s
		// The host only: the URL may carry the SMTP password.
		a.Log.Info("mail delivery by SMTP", "host", s.Host(), "tls_required", s.TLSRequired())
	default:
		sender = mail.NewLogSender(a.Log)
		if !cfg.Embedded() {
			a.Log.Warn("--mail-mode log writes every account mail, live link included, to the log: for development only; use --mail-mode smtp")
		}
	}
	return mail.NewWorker(a.Store, a.Sealer, sender, mail.Config{
		PublicURL:    cfg.LinkBase(),
		MaxAttempts:  cfg.MailMaxAttempts,
		Backoff:      cfg.MailRetryBackoff,
		MaxBackoff:   time.Hour,
		PollInterval: cfg.MailPollInterval,
		// A delivery never outlasts the SMTP timeout (the sender cuts the
		// connection); the margin covers recording its outcome.
		Lease: cfg.SMTPTimeout + 30*time.Second,
	}, a.now, a.Log, reg)
}
