package auth

import (
	"context"
	"encoding/json"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// Notice is what a notice mail tells the account's owner besides its kind:
// when it happened (UTC) and from which client. It is stored with the
// queued mail as JSON; it never holds a token or another secret.
type Notice struct {
	At        time.Time `json:"at"`
	IP        string    `json:"ip,omitempty"`
	UserAgent string    `json:"user_agent,omitempty"`
}

// outbox queues a mail in a transaction: store.Queries, or the
// store.UserTx of the mail's recipient.
type outbox interface {
	EnqueueMail(ctx context.Context, j store.MailJob) error
}

// queueNotice queues, in q's transaction, a mail of kind (store.Mail…)
// telling u that it happened now, at the request m describes: committed
// with the change it reports or not at all.
func (s *Service) queueNotice(ctx context.Context, q outbox, u store.User, kind string, now time.Time, m Meta) error {
	raw, err := json.Marshal(Notice{At: now.UTC(), IP: m.IP, UserAgent: m.userAgent()})
	if err != nil {
		return err
	}
	return q.EnqueueMail(ctx, store.MailJob{
		ID: s.newID(), Kind: kind, UserID: u.ID, To: u.Email, Name: u.Name, Notice: raw,
		CreatedAt: now, NextAttemptAt: now,
	})
}
