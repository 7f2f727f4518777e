package issuerapp

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/issuerapi"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// rateLimiter returns the limiter over the configured counter store, and
// starts sweeping that store's expired counters until ctx ends.
func (a *App) rateLimiter(ctx context.Context, reg prometheus.Registerer) (*ratelimit.Limiter, error) {
	var st ratelimit.Store = ratelimit.NewMemory()
	if a.Cfg.SharedRateLimits() {
		st = a.Store
	}
	l, err := ratelimit.New(st, a.Cfg.RateLimits, a.now, a.Log, reg)
	if err != nil {
		return nil, err
	}
	go ratelimit.Sweep(ctx, st, time.Minute, a.now, a.Log)
	return l, nil
}

// Serve runs the API and admin listeners until ctx ends, then shuts down
// gracefully.
func (a *App) Serve(ctx context.Context) error {
	cfg := a.Cfg
	if err := a.Keys.EnsureKey(ctx); err != nil {
		return err
	}
	ips, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return err
	}
	verifier, err := verify.New(a.Keys, verify.Config{
		Issuer: cfg.IssuerURL, Audience: cfg.Audience, Algorithms: []string{"RS256"}, ClockSkew: cfg.ClockSkew, Now: a.now,
	})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hasher := password.NewHasher(password.DefaultParams, cfg.HashConcurrency, rand.Reader)
	hasher.SetMaxWaiting(cfg.HashQueue)
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "issuer_password_hashes_total", Help: "Password hash computations run (hashes and verifications)."},
			func() float64 { return float64(hasher.Computed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "issuer_password_hashes_waiting", Help: "Requests waiting for a password-hashing slot."},
			func() float64 { return float64(hasher.Waiting()) }),
	)
	limiter, err := a.rateLimiter(ctx, reg)
	if err != nil {
		return err
	}
	mailer, err := a.mailWorker(reg)
	if err != nil {
		return err
	}
	hooks, err := a.webhookDispatcher(reg)
	if err != nil {
		return err
	}
	// Set before the flows are built: they keep the hooks they are given.
	a.MailQueued = mailer.Wake
	a.WebhookQueued = hooks.Wake
	svc := a.authWith(hasher, cfg.IssuerURL, cfg.Audience, cfg.RefreshTokenTTL, cfg.RefreshReuseLeeway)
	// The revocation feed keeps an entry for as long as a verifier allowing
	// --clock-skew may accept a token issued before it; the entries past
	// that are pruned every minute until ctx ends.
	feed := auth.NewRevocationFeed(a.Store, cfg.AccessTokenTTL, cfg.ClockSkew, a.now, a.Log)
	go feed.RunPruner(ctx, time.Minute)
	api := issuerapi.New(issuerapi.Deps{
		Auth:        svc,
		Keys:        a.Keys,
		Verifier:    verifier,
		DB:          a.Store,
		Idempotency: idempotency.New(a.Store, a.now),
		ClientIP:    ips,
		Limiter:     limiter,
		Logger:      a.Log,
		Revocations: feed,
	}, issuerapi.Config{IssuerURL: cfg.IssuerURL, JWKSMaxAge: cfg.JWKSMaxAge, MaxBodyBytes: cfg.MaxBodyBytes, Deprecations: cfg.Deprecations(), BrowserOrigins: cfg.BrowserOrigins, Demo: cfg.Demo})

	// Bodies are at most --max-body-bytes: the whole of one must arrive
	// within --read-body-timeout.
	timeouts := httpserver.Options{ReadHeaderTimeout: cfg.ReadHeaderTimeout, BodyTimeout: cfg.ReadBodyTimeout}
	main := httpserver.New("api", a.Log, api.Handler(httpserver.NewMetrics(reg, "issuer")), timeouts)
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	admin.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	adminSrv := httpserver.New("admin", a.Log, admin, timeouts)
	if err := main.Listen(cfg.Listen); err != nil {
		return err
	}
	if err := adminSrv.Listen(cfg.AdminListen); err != nil {
		return err
	}

	// Shutdown order: the listeners finish their requests; then the work
	// those requests left running in the background (a forgot-password
	// lookup, already answered 202) commits, so its mail is in the queue
	// before the database closes; then the mail worker stops, letting a
	// delivery in flight finish and be recorded. The webhook dispatcher
	// stops alongside it: deliveries in flight finish within its grace or
	// are given back untried. Whatever is still queued stays in the
	// database for the next start or another replica.
	mailCtx, stopMail := context.WithCancel(context.WithoutCancel(ctx))
	mailDone := make(chan struct{})
	go func() {
		defer close(mailDone)
		mailer.Run(mailCtx)
	}()
	hooksCtx, stopHooks := context.WithCancel(context.WithoutCancel(ctx))
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		hooks.Run(hooksCtx)
	}()
	keysCtx, stopKeys := context.WithCancel(ctx)
	keysDone := make(chan struct{})
	go func() {
		defer close(keysDone)
		a.runKeySchedule(keysCtx, svc)
	}()
	err = httpserver.Run(ctx, main, adminSrv)
	stopKeys()
	<-keysDone
	svc.Wait()
	stopMail()
	stopHooks()
	<-mailDone
	<-hooksDone
	return err
}
