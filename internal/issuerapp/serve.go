package issuerapp

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/issuerapi"
	"github.com/palisade-auth/palisade/internal/mail"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisstore"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisurl"
	"github.com/palisade-auth/palisade/internal/webhook"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// ValidateServe checks cfg as serve needs it before anything is opened:
// every flag (config's checks also fill in what they parse, hence the
// pointer), then what only the Redis client checks in --rate-limit-store
// (the database number, its own parameters), which the flags cannot check
// without linking the client into the verifier, which shares them.
func ValidateServe(cfg *config.Issuer) error {
	if err := cfg.ValidateServe(); err != nil {
		return err
	}
	if redisurl.Is(cfg.RateLimitStore) {
		if _, _, err := redisstore.Options(cfg.RateLimitStore, cfg.RateLimitStoreTimeout); err != nil {
			return fmt.Errorf("--rate-limit-store: %w", err)
		}
	}
	return nil
}

// rateLimiter returns the limiter over the configured counter store, and
// starts sweeping that store's expired counters until ctx ends.
func (a *App) rateLimiter(ctx context.Context, cfg config.Issuer, reg prometheus.Registerer) (*ratelimit.Limiter, error) {
	var st ratelimit.Store = ratelimit.NewMemory()
	switch {
	case redisurl.Is(cfg.RateLimitStore):
		rs, err := redisstore.Open(cfg.RateLimitStore, cfg.RateLimitStoreTimeout)
		if err != nil {
			return nil, fmt.Errorf("--rate-limit-store: %w", err)
		}
		redisstore.SetLog(a.Log)
		a.Log.InfoContext(ctx, "rate-limit counters in Redis", "url", redisurl.Redact(cfg.RateLimitStore), "timeout", cfg.RateLimitStoreTimeout)
		// Not a reason to stop: Redis may come up after the issuer. But a
		// Redis that answers and refuses the URL's user, password or
		// database will refuse it for good; anything else (a certificate
		// it does not trust) is told now, not only on the first request.
		if err := rs.Ping(ctx); redisstore.Misconfigured(err) {
			rs.Close()
			return nil, fmt.Errorf("--rate-limit-store: Redis refuses the URL's settings: %w", err)
		} else if err != nil {
			a.Log.WarnContext(ctx, "Redis did not answer at start; each limit applies its failure policy until it does", "err", err)
		}
		st = rs
	case cfg.SharedRateLimits():
		st = ratelimit.NewGCRA(a.Store)
	}
	sweeper, sweeps := st.(ratelimit.Sweeper)
	if _, inDatabase := st.(*ratelimit.GCRA); inDatabase {
		st = ratelimit.Bounded(st, ratelimit.DatabaseTimeout)
	}
	l, err := ratelimit.New(st, cfg.Overrides, a.now, a.Log, reg)
	if err != nil {
		return nil, err
	}
	if sweeps {
		go ratelimit.Sweep(ctx, sweeper, time.Minute, a.now, a.Log)
	}
	return l, nil
}

// Serve runs the API and admin listeners until ctx ends, then shuts down
// gracefully. The collectors in extra (the log output's) are served on
// /metrics beside its own.
func (a *App) Serve(ctx context.Context, extra ...prometheus.Collector) error {
	cfg := a.Cfg
	if err := a.Keys.EnsureKey(ctx); err != nil {
		return a.kekError(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	limiter, err := a.rateLimiter(ctx, cfg, reg)
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
	hasher := a.hasher(cfg.Passwords, reg)
	svc := a.newAuth(hasher, mailer.Wake, hooks.Wake)
	api, err := a.api(ctx, svc, limiter)
	if err != nil {
		return err
	}
	servers, err := a.listen(cfg.HTTP, api.Handler(httpserver.NewMetrics(reg, "issuer")), reg)
	if err != nil {
		return err
	}
	startMemoryControl(ctx, a.Log, hasher, cfg.Passwords.HashQueue, func() clientLoad {
		load := clientLoad{BodyBytes: api.HeldBodyBytes()}
		for _, s := range servers {
			load.Conns += s.Conns()
		}
		return load
	})
	return a.run(ctx, servers, svc, mailer, hooks)
}

// hasher is the password hasher with its bounds, and its metrics.
func (a *App) hasher(cfg config.Passwords, reg prometheus.Registerer) *password.Hasher {
	hasher := password.NewHasher(password.DefaultParams, cfg.HashConcurrency, rand.Reader)
	hasher.SetMaxWaiting(cfg.HashQueue)
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "issuer_password_hashes_total", Help: "Password hash computations run (hashes and verifications)."},
			func() float64 { return float64(hasher.Computed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "issuer_password_hashes_waiting", Help: "Requests waiting for a password-hashing slot."},
			func() float64 { return float64(hasher.Waiting()) }),
	)
	return hasher
}

// api builds the API over the flows, with the revocation feed's pruner
// running until ctx ends.
func (a *App) api(ctx context.Context, svc *auth.Service, limiter *ratelimit.Limiter) (*issuerapi.API, error) {
	cfg := a.Cfg
	ips, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	verifier, err := verify.New(a.Keys, verify.Config{
		Issuer: cfg.IssuerURL, Audience: cfg.Audience, Algorithms: []string{"RS256"}, ClockSkew: cfg.ClockSkew, Now: a.now,
	})
	if err != nil {
		return nil, err
	}
	// The revocation feed keeps an entry for as long as a verifier allowing
	// --clock-skew may accept a token issued before it; the entries past
	// that are pruned every minute until ctx ends. Its cursors are
	// authenticated with a key every replica sharing the KEK derives alike.
	feed := auth.NewRevocationFeed(a.Store, cfg.AccessTokenTTL, cfg.ClockSkew, a.Sealer.DeriveSecret("revocation-cursor"), a.now, a.Log)
	go feed.RunPruner(ctx, time.Minute)
	return issuerapi.New(issuerapi.Deps{
		Auth:        svc,
		Keys:        a.Keys,
		Verifier:    verifier,
		DB:          a.Store,
		Idempotency: idempotency.New(a.Store, a.now),
		ClientIP:    ips,
		Limiter:     limiter,
		Logger:      a.Log,
		Revocations: feed,
	}, issuerapi.Config{IssuerURL: cfg.IssuerURL, JWKSMaxAge: cfg.JWKSMaxAge, MaxBodyBytes: cfg.MaxBodyBytes, Deprecations: cfg.Deprecations(), BrowserOrigins: cfg.BrowserOrigins, Demo: cfg.Demo}), nil
}

// listen opens the API listener and the admin one (metrics, health).
func (a *App) listen(cfg config.HTTP, api http.Handler, reg *prometheus.Registry) ([]*httpserver.Server, error) {
	// Bodies are at most --max-body-bytes: the whole of one must arrive
	// within --read-body-timeout.
	timeouts := httpserver.Options{ReadHeaderTimeout: cfg.ReadHeaderTimeout, BodyTimeout: cfg.ReadBodyTimeout}
	mainOpts := timeouts
	mainOpts.AnswersServerOptions = true // issuerapi.Handler includes ServerOptions
	main := httpserver.New("api", a.Log, api, mainOpts)
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	admin.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	adminSrv := httpserver.New("admin", a.Log, admin, timeouts)
	if err := main.Listen(cfg.Listen); err != nil {
		return nil, err
	}
	if err := adminSrv.Listen(cfg.AdminListen); err != nil {
		return nil, err
	}
	return []*httpserver.Server{main, adminSrv}, nil
}

// run serves until ctx ends, with the workers and the key schedule beside
// the listeners.
//
// Shutdown order: the listeners finish their requests; then the work those
// requests left running in the background (a forgot-password lookup,
// already answered 202) commits, so its mail is in the queue before the
// database closes; then the mail worker stops, letting a delivery in flight
// finish and be recorded. The webhook dispatcher stops alongside it:
// deliveries in flight finish within its grace or are given back untried.
// Whatever is still queued stays in the database for the next start or
// another replica.
func (a *App) run(ctx context.Context, servers []*httpserver.Server, svc *auth.Service, mailer *mail.Worker, hooks *webhook.Dispatcher) error {
	stopMail, mailDone := goUntil(context.WithoutCancel(ctx), mailer.Run)
	stopHooks, hooksDone := goUntil(context.WithoutCancel(ctx), hooks.Run)
	stopKeys, keysDone := goUntil(ctx, func(ctx context.Context) { a.runKeySchedule(ctx, svc) })
	err := httpserver.Run(ctx, servers...)
	stopKeys()
	<-keysDone
	svc.Wait()
	stopMail()
	stopHooks()
	<-mailDone
	<-hooksDone
	return err
}

// goUntil runs fn in a goroutine with a context derived from parent; stop
// cancels that context, and done closes when fn has returned.
func goUntil(parent context.Context, fn func(context.Context)) (stop context.CancelFunc, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		fn(ctx)
	}()
	return cancel, ch
}
