package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/token"
)

// Sender delivers one rendered mail.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Queue is the part of the store the worker uses: the durable mail queue.
type Queue interface {
	ClaimMail(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.MailJob, error)
	MailSent(ctx context.Context, id string, now time.Time) error
	MailRetry(ctx context.Context, id string, attempts int, next time.Time, lastErr string) error
	MailFailed(ctx context.Context, id string, now time.Time, lastErr string) error
	// OneTimeTokenByHash is the state of a mail's link: a link used,
	// replaced by a newer one or expired before its mail went out is not
	// sent.
	OneTimeTokenByHash(ctx context.Context, hash string) (store.OneTimeToken, error)
}

// Opener opens the sealed link token of a queued mail (keys.Sealer).
type Opener interface {
	Open(sealed []byte, context string) ([]byte, error)
}

// Config tunes the worker.
type Config struct {
	// PublicURL is the base of the links in mails.
	PublicURL string
	// MaxAttempts bounds the deliveries tried for one mail; after the last
	// failure the mail is given up (marked failed).
	MaxAttempts int
	// Backoff is the wait after the first failed attempt; it doubles with
	// every further failure, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// PollInterval is how often the queue is looked at when nothing woke
	// the worker: mails queued by other replicas, retries that fell due,
	// and mails whose worker died mid-delivery (their lease lapsed).
	PollInterval time.Duration
	// Lease is how long a claimed mail stays invisible to other workers:
	// longer than one delivery (the sender's timeout) can take.
	Lease time.Duration
}

// Defaults for the zero fields of Config.
const (
	DefaultMaxAttempts  = 10
	DefaultBackoff      = 30 * time.Second
	DefaultMaxBackoff   = time.Hour
	DefaultPollInterval = 10 * time.Second
	DefaultLease        = 2 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	return c
}

// RetryDelay is the wait after the attempt-th failed delivery (1-based):
// Backoff doubled attempt-1 times, capped at MaxBackoff.
func (c Config) RetryDelay(attempt int) time.Duration {
	c = c.withDefaults()
	d := c.Backoff
	for i := 1; i < attempt && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.MaxBackoff)
}

// Worker drains the mail queue: it claims due mails one at a time (a lease,
// so that the workers of several replicas share the queue and a mail whose
// worker crashed falls due again), opens the token, renders, sends, and
// records the outcome. Delivery is at least once: a crash between sending
// and recording sends the mail again when its lease lapses.
type Worker struct {
	q      Queue
	opener Opener
	sender Sender
	cfg    Config
	now    func() time.Time
	log    *slog.Logger
	wake   chan struct{}

	sent, retried, failed, dropped *prometheus.CounterVec
}

// NewWorker returns a worker; its counters are registered with reg when it
// is not nil.
func NewWorker(q Queue, opener Opener, sender Sender, cfg Config, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	w := &Worker{
		q: q, opener: opener, sender: sender, cfg: cfg.withDefaults(), now: now, log: log,
		wake: make(chan struct{}, 1),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_mails_sent_total", Help: "Account mails delivered, by kind.",
		}, []string{"kind"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_mail_retries_total", Help: "Failed mail deliveries that will be retried, by kind.",
		}, []string{"kind"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_mails_failed_total", Help: "Account mails given up after their last attempt or an unrecoverable error, by kind.",
		}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_mails_dropped_total", Help: "Account mails not sent because their link was used, replaced or expired first, by kind.",
		}, []string{"kind"}),
	}
	if reg != nil {
		if err := errors.Join(reg.Register(w.sent), reg.Register(w.retried), reg.Register(w.failed), reg.Register(w.dropped)); err != nil {
			return nil, fmt.Errorf("mail: register metrics: %w", err)
		}
	}
	return w, nil
}

// Wake asks the worker to look at the queue now. It never blocks: a wake
// already pending covers this one.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run delivers mails until ctx ends: at once at start (mails queued before
// a restart), when woken, when a retry it scheduled falls due, and every
// PollInterval. When ctx ends during a delivery, that delivery finishes
// (bounded by the sender's timeout) and its outcome is recorded before Run
// returns.
func (w *Worker) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		next, err := w.Drain(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("mail queue", "err", err)
		}
		wait := w.cfg.PollInterval
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(w.now()), 0))
		}
		// Since Go 1.23 Reset also discards a tick not yet received.
		timer.Reset(wait)
	}
}

// Drain delivers every mail that is due, one at a time, until none is left
// or ctx ends. It returns the earliest retry it scheduled (zero if none).
func (w *Worker) Drain(ctx context.Context) (time.Time, error) {
	var next time.Time
	for ctx.Err() == nil {
		jobs, err := w.q.ClaimMail(ctx, w.now(), 1, w.cfg.Lease)
		if err != nil {
			return next, fmt.Errorf("mail: claim: %w", err)
		}
		if len(jobs) == 0 {
			return next, nil
		}
		// The delivery and its record outlive a shutdown that begins
		// meanwhile: a mail half-sent and not recorded would be sent twice.
		retryAt := w.deliver(context.WithoutCancel(ctx), jobs[0])
		if !retryAt.IsZero() && (next.IsZero() || retryAt.Before(next)) {
			next = retryAt
		}
	}
	return next, ctx.Err()
}

// errPermanent marks a failure that no retry can cure.
var errPermanent = errors.New("permanent")

// errLinkDead marks a mail whose link can no longer be followed: sending it
// would only confuse its reader, so it is dropped (recorded as failed, with
// the reason, and counted apart from delivery failures).
var errLinkDead = errors.New("the link is no longer valid")

// deliver tries one mail and records the outcome; it returns when the mail
// is due again if it will be retried.
func (w *Worker) deliver(ctx context.Context, j store.MailJob) time.Time {
	attempt := j.Attempts + 1
	err := w.send(ctx, j)
	now := w.now()
	// The log carries the job id, kind, attempt and error: never the
	// token, sealed or not, nor the mail's text.
	log := w.log.With("mail_id", j.ID, "kind", j.Kind, "attempt", attempt)
	if err == nil {
		if rerr := w.q.MailSent(ctx, j.ID, now); rerr != nil {
			log.Error("mail sent but not recorded; it will be sent again when its lease lapses", "err", rerr)
			return time.Time{}
		}
		w.sent.WithLabelValues(j.Kind).Inc()
		log.Info("mail sent")
		return time.Time{}
	}
	if errors.Is(err, errLinkDead) {
		if rerr := w.q.MailFailed(ctx, j.ID, now, err.Error()); rerr != nil {
			log.Error("mail dropped but not recorded", "err", err, "record_err", rerr)
			return time.Time{}
		}
		w.dropped.WithLabelValues(j.Kind).Inc()
		log.Info("mail not sent: its link is no longer valid", "reason", err.Error())
		return time.Time{}
	}
	if errors.Is(err, errPermanent) || attempt >= w.cfg.MaxAttempts {
		if rerr := w.q.MailFailed(ctx, j.ID, now, err.Error()); rerr != nil {
			log.Error("mail given up but not recorded", "err", err, "record_err", rerr)
			return time.Time{}
		}
		w.failed.WithLabelValues(j.Kind).Inc()
		log.Error("mail given up", "err", err)
		return time.Time{}
	}
	next := now.Add(w.cfg.RetryDelay(attempt))
	if rerr := w.q.MailRetry(ctx, j.ID, attempt, next, err.Error()); rerr != nil {
		// The lease still holds it; it is retried when that lapses.
		log.Error("mail retry not recorded", "err", err, "record_err", rerr)
		return time.Time{}
	}
	w.retried.WithLabelValues(j.Kind).Inc()
	log.Warn("mail delivery failed; will retry", "err", err, "next_attempt_at", next)
	return next
}

// send opens, renders and sends one mail. A notice has no link, so nothing
// about a link can make it stale: it is always sent.
func (w *Worker) send(ctx context.Context, j store.MailJob) error {
	if IsNotice(j.Kind) {
		return w.sendNotice(ctx, j)
	}
	if len(j.SealedToken) == 0 {
		return fmt.Errorf("%w: the mail has no token", errPermanent)
	}
	tok, err := w.opener.Open(j.SealedToken, auth.MailSealContext(j.ID))
	if err != nil {
		// A different key-encryption key, or a damaged row: waiting will
		// not help.
		return fmt.Errorf("%w: open the sealed token: %w", errPermanent, err)
	}
	link, err := w.q.OneTimeTokenByHash(ctx, token.Hash(string(tok)))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: its token is not stored", errLinkDead)
	case err != nil:
		return fmt.Errorf("look up the link's token: %w", err)
	case link.UsedAt != nil:
		return fmt.Errorf("%w: it was used, or replaced by a newer one", errLinkDead)
	case !w.now().Before(link.ExpiresAt):
		return fmt.Errorf("%w: it expired before the mail could be delivered", errLinkDead)
	}
	m, err := Compose(j.Kind, w.cfg.PublicURL, j.To, j.Name, string(tok), link.ExpiresAt.Sub(link.CreatedAt))
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	m.ID, m.Date = j.ID, w.now()
	return w.sender.Send(ctx, m)
}

// sendNotice renders and sends a notice from the facts queued with it.
func (w *Worker) sendNotice(ctx context.Context, j store.MailJob) error {
	var n auth.Notice
	if err := json.Unmarshal(j.Notice, &n); err != nil {
		return fmt.Errorf("%w: read the notice: %w", errPermanent, err)
	}
	m, err := ComposeNotice(j.Kind, j.To, j.Name, n)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	m.ID, m.Date = j.ID, w.now()
	return w.sender.Send(ctx, m)
}
