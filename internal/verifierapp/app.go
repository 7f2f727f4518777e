// Package verifierapp owns the assembly of the verifier: it turns a
// validated configuration into key sources, a pkg/verify Verifier, the
// proxy or forward-auth handler and the admin listener, so the cobra
// commands stay wiring-free.
package verifierapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// KeySet is a key source that loads in the background.
type KeySet interface {
	verify.KeySource
	Ready() bool
	LoadedAt() time.Time
	Close() error
}

// Keys builds the key source and the verifier of cfg. onRefresh sees every
// failed key-set load; it may be nil.
func Keys(ctx context.Context, cfg config.Verifier, log *slog.Logger, onRefresh func(error)) (KeySet, *verify.Verifier, error) {
	ks, err := openKeySet(ctx, cfg, log, onRefresh)
	if err != nil {
		return nil, nil, err
	}
	src := verify.KeySource(ks)
	algs := []string{"RS256"}
	if cfg.HS256SecretFile != "" {
		secret, err := readSecret(cfg.HS256SecretFile)
		if err != nil {
			ks.Close()
			return nil, nil, err
		}
		// Only the configuration adds HS256: a token's header never does.
		src, algs = verify.Sources(ks, secret), append(algs, "HS256")
	}
	v, err := verify.New(src, verify.Config{
		Issuer: cfg.Issuer, Audience: cfg.Audience, Algorithms: algs, ClockSkew: cfg.ClockSkew, CacheSize: cfg.CacheSize,
	})
	if err != nil {
		ks.Close()
		return nil, nil, err
	}
	return ks, v, nil
}

// openKeySet starts the key source: a remote JWK set or a watched file.
// Neither waits for the first load; readiness says when one has happened.
func openKeySet(ctx context.Context, cfg config.Verifier, log *slog.Logger, onRefresh func(error)) (KeySet, error) {
	report := func(err error) {
		if err != nil && onRefresh != nil {
			onRefresh(err)
		}
	}
	if cfg.JWKSFile != "" {
		return verify.NewFileSource(cfg.JWKSFile, verify.FileOptions{Logger: log, OnReload: report})
	}
	return verify.NewRemoteSource(ctx, cfg.JWKSURL, verify.RemoteOptions{
		Client: &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2}},
		Logger: log, OnRefresh: report,
	})
}

// readSecret loads the shared HS256 secret as a key without a kid.
func readSecret(path string) (verify.KeySource, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --hs256-secret-file: %w", err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) < 32 {
		return nil, errors.New("--hs256-secret-file must hold at least 32 bytes")
	}
	k, err := jwk.FromRaw(b)
	if err != nil {
		return nil, err
	}
	set := jwk.NewSet()
	if err := set.AddKey(k); err != nil {
		return nil, err
	}
	return verify.NewStaticSource(set), nil
}

// Serve runs `verifier serve` until ctx ends.
func Serve(ctx context.Context, cfg config.Verifier, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The metrics exist before the key source starts: its background
	// loop reports failures from the first fetch on.
	var loaded atomic.Pointer[KeySet]
	metrics := proxy.NewMetrics(reg, func() float64 {
		ks := loaded.Load()
		if ks == nil || !(*ks).Ready() {
			return -1
		}
		return time.Since((*ks).LoadedAt()).Seconds()
	})
	ks, v, err := Keys(ctx, cfg, log, func(err error) {
		metrics.RefreshFailed()
		log.Warn("key set load failed; keeping the last good set", slog.String("err", err.Error()))
	})
	if err != nil {
		return err
	}
	defer ks.Close()
	loaded.Store(&ks)
	trusted, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return err
	}
	pcfg := proxy.Config{
		Public: proxy.NewPublicPaths(cfg.PublicPaths), TrustedProxies: trusted, Metrics: metrics, Logger: log,
	}
	if len(cfg.IssuerPaths) > 0 {
		pcfg.IssuerPaths = proxy.NewPublicPaths(cfg.IssuerPaths)
	}
	if len(cfg.BrowserOrigins) > 0 {
		pcfg.Cookies = &verify.CookieAuth{Origins: cfg.BrowserOrigins}
	}
	var h http.Handler
	if cfg.Mode == config.ModeForwardAuth {
		if pcfg.ForwardHeaders, err = proxy.ParseForwardHeaders(cfg.ForwardHeaders); err != nil {
			return err
		}
		h = proxy.NewForwardAuth(v, pcfg)
	} else {
		upstream, err := url.Parse(cfg.Upstream)
		if err != nil {
			return err
		}
		h = proxy.NewProxy(v, upstream, nil, pcfg)
	}
	h = httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, h)))
	// The verifier proxies uploads of any length: a body is bounded by
	// how long it may stall and how slowly it may trickle, not by how
	// long it takes.
	timeouts := httpserver.Options{ReadHeaderTimeout: cfg.ReadHeaderTimeout, BodyIdleTimeout: cfg.ReadIdleTimeout, BodyMinRate: cfg.ReadMinRate}
	main := httpserver.New("proxy", log, h, timeouts)
	admin := httpserver.New("admin", log, adminMux(reg, ks), timeouts)
	if err := main.Listen(cfg.Listen); err != nil {
		return err
	}
	if err := admin.Listen(cfg.AdminListen); err != nil {
		main.Close()
		return err
	}
	return httpserver.Run(ctx, main, admin)
}

func adminMux(reg *prometheus.Registry, ks KeySet) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	// Not ready until a key set is loaded: the verifier never fails open,
	// so before then it could only refuse every request.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !ks.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"unavailable"}` + "\n"))
			return
		}
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return mux
}

// Check verifies one token as Serve would, waiting up to 10 s for the key
// set to load.
func Check(ctx context.Context, cfg config.Verifier, log *slog.Logger, token string) (*verify.Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ks, v, err := Keys(ctx, cfg, log, func(err error) { log.Warn("key set load failed", slog.String("err", err.Error())) })
	if err != nil {
		return nil, err
	}
	defer ks.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ks.Ready() {
		select {
		case <-ctx.Done():
			return nil, errors.New("no key set loaded within 10s")
		case <-tick.C:
		}
	}
	return v.Verify(ctx, token)
}
