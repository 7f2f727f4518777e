// Package verifierapp owns the assembly of the verifier: it turns a
// validated configuration into key sources, a pkg/verify Verifier, the
// proxy or forward-auth handler and the admin listener, so the cobra
// commands stay wiring-free.
package verifierapp

import (
	"context"
	"encoding/json"
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

// LoadingKeySource is a key source that loads in the background.
type LoadingKeySource interface {
	verify.KeySource
	Ready() bool
	LoadedAt() time.Time
	Close() error
}

// Sources are what the verifier consults besides the token: the key set
// and, with --revocation-url, the revocation list.
type Sources struct {
	Keys        LoadingKeySource
	Revocations *verify.RevocationSource // nil without --revocation-url
}

// Ready reports whether every source has loaded.
func (s Sources) Ready() bool {
	return s.Keys.Ready() && (s.Revocations == nil || s.Revocations.Ready())
}

// Close stops the sources' background work.
func (s Sources) Close() {
	s.Keys.Close()
	if s.Revocations != nil {
		s.Revocations.Close()
	}
}

// Hooks see every failed background load; each may be nil.
type Hooks struct {
	KeySetFailed      func(error)
	RevocationsFailed func(error)
}

// Keys builds the sources and the verifier of cfg.
func Keys(ctx context.Context, cfg config.Verifier, log *slog.Logger, hooks Hooks) (Sources, *verify.Verifier, error) {
	ks, err := openKeySource(ctx, cfg, log, hooks.KeySetFailed)
	if err != nil {
		return Sources{}, nil, err
	}
	srcs := Sources{Keys: ks}
	src := verify.KeySource(ks)
	algs := []string{"RS256"}
	if cfg.HS256SecretFile != "" {
		secret, err := readSecret(cfg.HS256SecretFile)
		if err != nil {
			srcs.Close()
			return Sources{}, nil, err
		}
		// Only the configuration adds HS256: a token's header never does.
		src, algs = verify.Sources(ks, secret), append(algs, "HS256")
	}
	if cfg.RevocationURL != "" {
		srcs.Revocations, err = verify.NewRevocationSource(ctx, cfg.RevocationURL, verify.RevocationOptions{
			PollInterval: cfg.RevocationPollInterval, MaxStaleness: cfg.RevocationMaxStaleness, FailClosed: cfg.RevocationFailClosed,
			Client: &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2}},
			Logger: log, OnRefresh: failuresOnly(hooks.RevocationsFailed),
		})
		if err != nil {
			srcs.Close()
			return Sources{}, nil, err
		}
	}
	v, err := verify.New(src, verify.Config{
		Issuer: cfg.Issuer, Audience: cfg.Audience, Algorithms: algs, ClockSkew: cfg.ClockSkew, CacheSize: cfg.CacheSize,
		Revocations: srcs.Revocations,
	})
	if err != nil {
		srcs.Close()
		return Sources{}, nil, err
	}
	return srcs, v, nil
}

// failuresOnly passes fn the errors among outcomes; nil for a nil fn.
func failuresOnly(fn func(error)) func(error) {
	if fn == nil {
		return nil
	}
	return func(err error) {
		if err != nil {
			fn(err)
		}
	}
}

// openKeySource starts the key source: a remote JWK set or a watched file.
// Neither waits for the first load; readiness says when one has happened.
func openKeySource(ctx context.Context, cfg config.Verifier, log *slog.Logger, onRefresh func(error)) (LoadingKeySource, error) {
	report := failuresOnly(onRefresh)
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

// Serve runs `verifier serve` until ctx ends. The collectors in extra (the
// log output's) are served on /metrics beside its own.
func Serve(ctx context.Context, cfg config.Verifier, log *slog.Logger, extra ...prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	// The metrics exist before the key source starts: its background
	// loop reports failures from the first fetch on.
	var loaded atomic.Pointer[LoadingKeySource]
	metrics := proxy.NewMetrics(reg, func() float64 {
		ks := loaded.Load()
		if ks == nil || !(*ks).Ready() {
			return -1
		}
		return time.Since((*ks).LoadedAt()).Seconds()
	})
	srcs, v, err := Keys(ctx, cfg, log, Hooks{
		KeySetFailed: func(err error) {
			metrics.RefreshFailed()
			log.Warn("key set load failed; keeping the last good set", slog.String("err", err.Error()))
		},
		RevocationsFailed: func(error) { metrics.RevocationRefreshFailed() }, // the source logs it
	})
	if err != nil {
		return err
	}
	defer srcs.Close()
	ks := srcs.Keys
	loaded.Store(&ks)
	if revs := srcs.Revocations; revs != nil {
		metrics.WithRevocations(reg, func() float64 {
			st, ok := revs.Staleness()
			if !ok {
				return -1
			}
			return st.Seconds()
		}, func() float64 { return float64(revs.Len()) })
	}
	h, err := handler(cfg, v, metrics, log)
	if err != nil {
		return err
	}
	if cfg.Mode == config.ModeProxy {
		// Forward-auth judges OPTIONS * as any request: its 200 means
		// "allowed", and came for one without a token.
		h = httpserver.ServerOptions(h)
	}
	h = httpserver.RequestID(httpserver.AccessLog(log, httpserver.Recover(log, h)))
	// The verifier proxies uploads of any length: a body is bounded by
	// how long it may stall and how slowly it may trickle, not by how
	// long it takes.
	timeouts := httpserver.Options{ReadHeaderTimeout: cfg.ReadHeaderTimeout, BodyIdleTimeout: cfg.ReadIdleTimeout, BodyMinRate: cfg.ReadMinRate}
	mainOpts := timeouts
	mainOpts.AnswersServerOptions = true
	if cfg.Mode == config.ModeProxy {
		// gRPC clients speak HTTP/2 with prior knowledge.
		mainOpts.Protocols = proxy.ServerProtocols()
	}
	main := httpserver.New("proxy", log, h, mainOpts)
	admin := httpserver.New("admin", log, adminMux(reg, srcs), timeouts)
	if err := main.Listen(cfg.Listen); err != nil {
		return err
	}
	if err := admin.Listen(cfg.AdminListen); err != nil {
		main.Close()
		return err
	}
	return httpserver.Run(ctx, main, admin)
}

// handler returns the mode's handler: the forward-auth endpoint, or the
// reverse proxy to the upstream over the configured protocol.
func handler(cfg config.Verifier, v *verify.Verifier, metrics *proxy.Metrics, log *slog.Logger) (http.Handler, error) {
	trusted, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return nil, err
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
	if cfg.Mode == config.ModeForwardAuth {
		if pcfg.ForwardHeaders, err = proxy.ParseForwardHeaders(cfg.ForwardHeaders); err != nil {
			return nil, err
		}
		return proxy.NewForwardAuth(v, pcfg), nil
	}
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	pcfg.UpstreamProtocol, pcfg.UpstreamPing = cfg.UpstreamProtocol, cfg.UpstreamPingInterval
	return proxy.NewProxy(v, upstream, nil, pcfg), nil
}

func adminMux(reg *prometheus.Registry, srcs Sources) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	// Not ready until a key set is loaded: the verifier never fails open,
	// so before then it could only refuse every request. Likewise for the
	// first revocation list, when there is one.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := readiness{Status: "ok"}
		if revs := srcs.Revocations; revs != nil {
			st, loaded := revs.Staleness()
			body.Revocations = &revocationReadiness{
				Loaded: loaded, StalenessSeconds: st.Seconds(), Stale: revs.Stale(),
				FailClosed: revs.FailClosed(), Entries: revs.Len(),
			}
		}
		if !srcs.Ready() {
			body.Status = "unavailable"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}

// readiness is the body of /readyz.
type readiness struct {
	Status      string               `json:"status"`
	Revocations *revocationReadiness `json:"revocations,omitempty"`
}

// revocationReadiness is the revocation list's part of /readyz.
type revocationReadiness struct {
	Loaded           bool    `json:"loaded"`
	StalenessSeconds float64 `json:"staleness_seconds"`
	Stale            bool    `json:"stale"`
	FailClosed       bool    `json:"fail_closed"`
	Entries          int     `json:"entries"`
}

// Check verifies one token as Serve would, waiting up to 10 s for the key
// set (and the revocation list, when configured) to load.
func Check(ctx context.Context, cfg config.Verifier, log *slog.Logger, token string) (*verify.Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	srcs, v, err := Keys(ctx, cfg, log, Hooks{KeySetFailed: func(err error) { log.Warn("key set load failed", slog.String("err", err.Error())) }})
	if err != nil {
		return nil, err
	}
	defer srcs.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !srcs.Ready() {
		select {
		case <-ctx.Done():
			if !srcs.Keys.Ready() {
				return nil, errors.New("no key set loaded within 10s")
			}
			return nil, errors.New("no revocation list loaded within 10s")
		case <-tick.C:
		}
	}
	return v.Verify(ctx, token)
}
