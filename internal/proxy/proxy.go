package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/problem"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// Proxy forwards requests with a valid access token to the upstream, with
// the identity headers set, and answers every other request itself.
type Proxy struct {
	gate
	rp *httputil.ReverseProxy
}

// NewTransport is the transport to the upstream: a large keep-alive pool,
// since every request of every client goes to the one app beside us, and
// no environment proxy, since the app is local.
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// NewProxy returns the proxy to upstream. transport nil means NewTransport().
func NewProxy(v *verify.Verifier, upstream *url.URL, transport http.RoundTripper, cfg Config) *Proxy {
	if transport == nil {
		transport = NewTransport()
	}
	p := &Proxy{gate: gate{v: v, cfg: cfg}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite(upstream),
		Transport:    transport,
		ErrorHandler: p.upstreamError,
		ErrorLog:     slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return p
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// First, on every path, public or not: a client never speaks for an
	// identity.
	StripAuthHeaders(r.Header)
	id, ok := p.decide(w, r, r.Method, r.URL.EscapedPath(), true)
	if !ok {
		return
	}
	if id != nil {
		r = r.WithContext(verify.NewContext(r.Context(), id))
	}
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) rewrite(upstream *url.URL) func(*httputil.ProxyRequest) {
	return func(pr *httputil.ProxyRequest) {
		pr.SetURL(upstream)
		if p.cfg.TrustedProxies != nil && p.cfg.TrustedProxies.TrustedPeer(pr.In) {
			// Keep the chain a trusted proxy reported; otherwise the
			// client's own X-Forwarded-For is dropped.
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
		}
		pr.SetXForwarded()
		StripAuthHeaders(pr.Out.Header)
		if id, ok := verify.FromContext(pr.In.Context()); ok {
			SetIdentity(pr.Out.Header, id)
		}
		if rid := httpserver.RequestIDFromContext(pr.In.Context()); rid != "" {
			pr.Out.Header.Set(httpserver.HeaderRequestID, rid)
		}
	}
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody is left to answer.
		w.WriteHeader(499)
		return
	}
	p.cfg.Logger.WarnContext(r.Context(), "upstream unavailable", slog.String("err", err.Error()))
	problem.Write(w, problem.Problem{
		Status: http.StatusBadGateway, Code: "bad_gateway", Title: "Bad Gateway",
		Detail: "The application behind the verifier did not answer.",
	})
}
