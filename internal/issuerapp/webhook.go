package issuerapp

import (
	"crypto/rand"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/webhook"
)

// webhookDispatcher builds the dispatcher that delivers the webhook outbox
// through the guard's client, which applies the URL rules to the address
// each connection goes to.
func (a *App) webhookDispatcher(reg prometheus.Registerer) (*webhook.Dispatcher, error) {
	cfg := a.Cfg
	return webhook.New(a.Store, a.Sealer, a.Guard.Client(cfg.WebhookTimeout), webhook.Config{
		Timeout:      cfg.WebhookTimeout,
		RetryBackoff: cfg.WebhookRetryBackoff,
		MaxAttempts:  cfg.WebhookMaxAttempts,
		MaxInFlight:  cfg.WebhookConcurrency,
		Retention:    cfg.WebhookRetention,
	}, a.Log, reg, a.now, rand.Reader)
}
