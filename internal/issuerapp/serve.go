package issuerapp

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/issuerapi"
	"github.com/palisade-auth/palisade/pkg/verify"
)

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
	api := issuerapi.New(issuerapi.Deps{
		Auth:        a.Auth(cfg.HashConcurrency, cfg.IssuerURL, cfg.Audience, cfg.RefreshTokenTTL, cfg.RefreshReuseLeeway),
		Keys:        a.Keys,
		Verifier:    verifier,
		DB:          a.Store,
		Idempotency: idempotency.New(a.Store, a.now),
		ClientIP:    ips,
		Logger:      a.Log,
	}, issuerapi.Config{IssuerURL: cfg.IssuerURL, JWKSMaxAge: cfg.JWKSMaxAge, MaxBodyBytes: cfg.MaxBodyBytes})

	main := httpserver.New("api", a.Log, api.Handler(httpserver.NewMetrics(reg, "issuer")), httpserver.Options{})
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	admin.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	adminSrv := httpserver.New("admin", a.Log, admin, httpserver.Options{})
	if err := main.Listen(cfg.Listen); err != nil {
		return err
	}
	if err := adminSrv.Listen(cfg.AdminListen); err != nil {
		return err
	}
	return httpserver.Run(ctx, main, adminSrv)
}
