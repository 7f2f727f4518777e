package config

import (
	"net/netip"
	"time"

	"github.com/spf13/pflag"
)

// Webhooks is how the issuer delivers its webhook outbox.
type Webhooks struct {
	WebhookTimeout      time.Duration
	WebhookRetryBackoff time.Duration
	WebhookMaxAttempts  int
	WebhookRetention    time.Duration
	WebhookConcurrency  int
}

// Flags registers the delivery flags.
func (w *Webhooks) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&w.WebhookTimeout, "webhook-timeout", 5*time.Second, "time one webhook delivery has, connect to the end of the response; only a 2xx within it is success")
	fs.DurationVar(&w.WebhookRetryBackoff, "webhook-retry-backoff", 30*time.Second, "longest wait after a delivery's first failure; it doubles per failure, and the wait is drawn below it (full jitter)")
	fs.IntVar(&w.WebhookMaxAttempts, "webhook-max-attempts", 12, "attempts of one delivery before it is marked failed (12 with 30s backoff: about a day)")
	fs.DurationVar(&w.WebhookRetention, "webhook-retention", 720*time.Hour, "how long delivered and failed deliveries are kept for the deliveries list and redelivery")
	fs.IntVar(&w.WebhookConcurrency, "webhook-concurrency", 8, "webhook deliveries one replica sends at once")
}

// Validate checks the part.
func (w *Webhooks) Validate() error {
	var p problems
	if w.WebhookTimeout < 100*time.Millisecond || w.WebhookTimeout > time.Minute {
		p.addf("--webhook-timeout must be between 100ms and 1m, got %s", w.WebhookTimeout)
	}
	if w.WebhookRetryBackoff < 10*time.Millisecond || w.WebhookRetryBackoff > time.Hour {
		p.addf("--webhook-retry-backoff must be between 10ms and 1h, got %s", w.WebhookRetryBackoff)
	}
	if w.WebhookMaxAttempts < 1 || w.WebhookMaxAttempts > 50 {
		p.addf("--webhook-max-attempts must be between 1 and 50, got %d", w.WebhookMaxAttempts)
	}
	if w.WebhookRetention < time.Hour {
		p.addf("--webhook-retention must be at least 1h, got %s", w.WebhookRetention)
	}
	if w.WebhookConcurrency < 1 || w.WebhookConcurrency > 256 {
		p.addf("--webhook-concurrency must be between 1 and 256, got %d", w.WebhookConcurrency)
	}
	return p.err()
}

// WebhookGuard is the outbound URL rules' allow-list, which `issuer serve`
// and the commands that register webhook URLs share.
type WebhookGuard struct {
	WebhookAllowCIDRs []string
	allow             []netip.Prefix
}

// Flags registers --webhook-allow-cidr.
func (g *WebhookGuard) Flags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&g.WebhookAllowCIDRs, "webhook-allow-cidr", nil, "a range (CIDR) webhook URLs may reach although it is loopback, private or otherwise internal, over http too, e.g. an in-cluster service network (repeatable)")
}

// Validate checks the ranges and keeps them for Allow.
func (g *WebhookGuard) Validate() error {
	var p problems
	g.allow = nil
	for _, s := range g.WebhookAllowCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			p.addf("--webhook-allow-cidr must be a CIDR like 10.96.0.0/12 or fd00::/8, got %q", s)
			continue
		}
		g.allow = append(g.allow, pfx.Masked())
	}
	return p.err()
}

// Allow is the ranges of --webhook-allow-cidr as Validate parsed them.
func (g *WebhookGuard) Allow() []netip.Prefix { return g.allow }
