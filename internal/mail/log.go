package mail

import (
	"context"
	"log/slog"
)

// LogSender "sends" mail by writing it to the log: the --mail-mode log of
// the embedded default, so that a newcomer running the issuer on a laptop
// can follow a reset or verification link without a mail server.
//
// This is the one deliberate exception to the rule that no token is ever
// logged: the link in the mail carries a live one-time token. It is for
// development only; production runs --mail-mode smtp, where neither the
// token nor its sealed form reaches a log line.
type LogSender struct {
	log *slog.Logger
}

var _ Sender = (*LogSender)(nil)

// NewLogSender returns a sender that logs each mail, link included, at
// info level on log.
func NewLogSender(log *slog.Logger) *LogSender { return &LogSender{log: log} }

// Send logs m.
func (s *LogSender) Send(ctx context.Context, m Message) error {
	s.log.InfoContext(ctx, "mail (log mode, development only: the link is live)",
		"mail_id", m.ID, "to", m.To, "subject", m.Subject, "link", m.Link, "text", m.Text)
	return nil
}
