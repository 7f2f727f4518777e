package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/problem"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// Proxy forwards requests with a valid access token to the upstream, with
// the identity headers set, and answers every other request itself.
type Proxy struct {
	gate
	rp            *httputil.ReverseProxy
	direct        *direct  // nil: every request goes through rp
	hiddenCookies []string // never forwarded to the app
}

// mayHaveTrailers reports whether res, with a body, announced trailers or
// is an HTTP/2 answer to a request that accepts them ("TE: trailers"),
// which may add trailers it did not announce.
func mayHaveTrailers(res *http.Response) bool {
	if res.Request == nil {
		// A transport of the caller's own may leave it out.
		return len(res.Trailer) > 0
	}
	if res.Request.Method == http.MethodHead || res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified {
		return false
	}
	return len(res.Trailer) > 0 || res.ProtoMajor == 2 && httpguts.HeaderValuesContainsToken(res.Request.Header["Te"], "trailers")
}

// maxUpstreamHeaderBytes bounds each head of an upstream's answer, a 1xx
// one too, on every path to the app: net/http's default of 10 MB let an
// app push the verifier far past its memory limit.
const maxUpstreamHeaderBytes = 1 << 20

// errBadStatus is an upstream answer whose status has not three digits
// from 100 up; http.ResponseWriter.WriteHeader panics on it.
var errBadStatus = errors.New("proxy: upstream answered with an invalid status code")

// requestBody is the body of the request res answers, nil when a
// caller's own transport left res without its request.
func requestBody(res *http.Response) io.ReadCloser {
	if res.Request == nil {
		return nil
	}
	return res.Request.Body
}

func validStatus(code int) bool { return code >= 100 && code <= 999 }

// NewTransport is the HTTP/1.1 transport to the upstream, the app beside
// us: an idle pool as large as the concurrency we serve, since every
// request of every client goes to that one host and a pool too small
// closes and redials connections under load; no environment proxy, since
// the app is local; no transparent gzip, so the client's Accept-Encoding
// reaches the app and a body is copied, never decompressed in between;
// and timeouts on connecting, never on a response, which may stream.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            watchedDial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		ForceAttemptHTTP2:      false,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxUpstreamHeaderBytes,
	}
}

// NewProxy returns the proxy to upstream, which speaks
// cfg.UpstreamProtocol. transport nil means the protocol's own:
// NewTransport() or NewH2CTransport(cfg.UpstreamPing).
func NewProxy(v *verify.Verifier, upstream *url.URL, transport http.RoundTripper, cfg Config) *Proxy {
	h2c := cfg.UpstreamProtocol == UpstreamH2C
	defaultTransport := transport == nil
	switch {
	case defaultTransport && h2c:
		transport = NewH2CTransport(cfg.UpstreamPing)
	case defaultTransport:
		transport = NewTransport()
	}
	p := &Proxy{gate: newGate(v, cfg, false), hiddenCookies: hiddenCookies(cfg)}
	buffers := newBufferPool()
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite(upstream),
		Transport:    transport,
		ErrorHandler: p.upstreamError,
		ModifyResponse: func(res *http.Response) error {
			if !validStatus(res.StatusCode) {
				return errBadStatus // 502, not net/http's panic on WriteHeader
			}
			dropOwnAnswerHeaders(res.Header)
			if out, ok := requestBody(res).(*duplexOut); ok {
				res.Body = &closesUpload{ReadCloser: res.Body, out: out}
			}
			if res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified {
				// No content, whatever Content-Length says (a 304's may
				// give the representation's size): Go's HTTP/2 transport
				// waits for that many bytes and fails the body, which reset
				// the answer, and its clients do the same with the header
				// passed on, which a 304 may leave out.
				res.Body.Close()
				res.Body = http.NoBody
				res.Header.Del("Content-Length")
			}
			if mayHaveTrailers(res) {
				// An HTTP/2 answer may carry both a length and trailers;
				// copied to an HTTP/1.1 client, the length meant a body
				// without chunks, which has no room for them.
				res.Header.Del("Content-Length")
			}
			return nil
		},
		// Its one message, a body copy that failed, is counted and
		// logged by endBrokenAnswer with its cause (at warning level when
		// the app is at fault); a client that stalled is not.
		ErrorLog:   slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BufferPool: buffers,
	}
	if defaultTransport && !h2c && directUpstream(upstream) {
		p.direct = newDirect(upstream, p.rewrite(upstream), buffers)
	}
	return p
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// First, on every path, public or not: a client never speaks for an
	// identity.
	StripAuthHeaders(r.Header)
	// Only a WebSocket upgrade is tunnelled, and only with a valid token,
	// public path or not: the verifier sees no request on a switched
	// connection. Any other upgrade (h2c above all) is dropped and the
	// request answered as plain HTTP/1.1.
	up := upgradeOf(r.Header)
	if up == upgradeOther {
		dropUpgrade(r.Header)
	}
	if !p.forwardable(w, r) {
		return
	}
	id, ok := p.decide(w, r, r.Method, r.URL.EscapedPath(), up != upgradeWebSocket)
	if !ok {
		return
	}
	if id != nil {
		r = r.WithContext(verify.NewContext(r.Context(), id))
	}
	// Only HTTP/2 carries a gRPC stream to the app, and only a caller
	// with a valid token may keep one open as long as it likes; a call
	// on a public path stays bounded throughout.
	if id != nil && p.cfg.UpstreamProtocol == UpstreamH2C {
		r = boundFirstMessage(r)
	}
	keepUntyped(w.Header())
	if p.direct != nil && up != upgradeWebSocket && p.direct.takes(r) {
		defer p.endBrokenAnswer(w, r)
		if err := p.direct.serve(w, r); err != nil {
			p.upstreamError(w, r, err)
		}
		return
	}
	w, body := newAnswerWriter(w, r, p.cfg.UpstreamProtocol != UpstreamH2C, p.rp.BufferPool)
	if body != nil {
		r = body.traced(r)
		// The answer is out, or broke off: what is left of the body is
		// not waited for. Deferred first, so that it runs after
		// endBrokenAnswer: ending the body cancels the request, which
		// would make endBrokenAnswer count an app's broken answer as the
		// client leaving.
		defer body.finish()
	}
	defer p.endBrokenAnswer(w, r)
	p.rp.ServeHTTP(w, r)
}

// ReasonUnforwardable is the metrics reason of a request the proxy does
// not forward, valid token or none (see forwardable).
const ReasonUnforwardable verify.Reason = "unforwardable"

// forwardable reports whether r can go to the app as a request for one of
// its resources, and otherwise answers it. A CONNECT would make the
// verifier a tunnel past which it sees no request (over HTTP/2 a real one,
// into the app); reverse proxies refuse it, and so does this one, 501. A
// target that is not a path (an absolute URL's is one), an authority or an
// opaque "host:port" with any other method, reached an HTTP/1.1 app as
// its path and failed against an h2c one, where it counted as the app's
// failure: 400.
func (p *Proxy) forwardable(w http.ResponseWriter, r *http.Request) bool {
	var prob problem.Problem
	switch {
	case r.Method == http.MethodConnect:
		prob = problem.Problem{Status: http.StatusNotImplemented, Code: "not_implemented", Detail: "The verifier does not forward CONNECT."}
	case r.URL.Opaque != "" || !strings.HasPrefix(r.URL.Path, "/") && (r.URL.Path != "" || r.URL.Host == ""):
		prob = problem.Problem{Status: http.StatusBadRequest, Code: "malformed_request", Detail: "The request target is not a path."}
	default:
		return true
	}
	p.cfg.Metrics.outcome(OutcomeRejected, ReasonUnforwardable)
	problem.Write(w, prob)
	return false
}

// isGRPCOverHTTP2 reports a gRPC call that reads its status from HTTP/2
// trailers: gRPC-Web carries its trailers in the body, and a cut answer
// is better reset there than made to look complete.
func isGRPCOverHTTP2(h http.Header) bool {
	return httpserver.IsGRPC(h) && !strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "application/grpc-web")
}

// endBrokenAnswer, deferred, accounts for an answer that broke off after
// its head went out: both paths then panic with http.ErrAbortHandler,
// which resets the stream so the client cannot take the answer for
// complete. It counts and logs why (verifier_proxy_failures_total), and
// ends a gRPC call with the status the cause deserves, in trailers, where
// a reset reads only as INTERNAL, not one a client may retry:
// DEADLINE_EXCEEDED when the client's body stalled before its first
// message was whole, UNAVAILABLE when the app or the connection to it
// failed. Anything else, and an answer to a client that went away, is
// reset as before.
func (p *Proxy) endBrokenAnswer(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v != http.ErrAbortHandler {
		panic(v)
	}
	settle(w, r)
	code, message := grpcUnavailable, "the application behind the verifier broke off the call"
	switch {
	case httpserver.BodyTimedOut(r.Context()):
		code, message = grpcDeadlineExceeded, grpcRefusals[refuseBodyTimeout].message
		p.cfg.Metrics.failure(FailureBodyTimeout)
	case r.Context().Err() != nil:
		p.cfg.Metrics.failure(FailureClientGone)
		panic(v)
	case bodyFailed(w, r):
		p.cfg.Metrics.failure(FailureBadBody)
		panic(v)
	default:
		p.cfg.Metrics.failure(FailureUpstream)
		p.cfg.Logger.WarnContext(r.Context(), "upstream broke off its answer",
			slog.String("request_id", httpserver.RequestIDFromContext(r.Context())), slog.String("path", httpserver.LogPath(r.URL.Path)))
	}
	if r.ProtoMajor != 2 || !isGRPCOverHTTP2(r.Header) {
		panic(v)
	}
	h := w.Header()
	h.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(code))
	h.Set(http.TrailerPrefix+"Grpc-Message", grpcPercentEncode(message))
}

func (p *Proxy) rewrite(upstream *url.URL) func(*httputil.ProxyRequest) {
	return func(pr *httputil.ProxyRequest) {
		pr.SetURL(upstream)
		if p.cfg.TrustedProxies != nil && p.cfg.TrustedProxies.TrustedPeer(pr.In) {
			// Keep the chain a trusted proxy reported; otherwise the
			// client's own X-Forwarded-For is dropped.
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
		} else {
			stripUntrusted(pr.Out.Header)
		}
		pr.SetXForwarded()
		StripAuthHeaders(pr.Out.Header)
		// Request trailers are not passed on. Their values arrive after
		// the body, beyond any check here (an X-Auth-User-Id trailer
		// included), and a trailer frame from a client makes grpc-go end
		// the whole connection, every user's calls on it. Cut, they used
		// to reach the app as names without values.
		pr.Out.Trailer = nil
		if in, ok := pr.In.Body.(*duplexBody); ok && pr.Out.Body != nil {
			if in.out != nil {
				// Read from the client's body itself: ReverseProxy's
				// wrapper fails reads once ServeHTTP returns, and the
				// goroutine reading for the transport may be in one.
				pr.Out.Body = in.out
			} else {
				pr.Out.Body = &streamBody{ReadCloser: pr.Out.Body, in: in}
			}
		}
		// The refresh and CSRF cookies are the issuer's business; an app
		// (or its logs) holding them could renew the session or forge the
		// double submit. Only the issuer's own paths, when it sits behind
		// the proxy, receive them.
		if p.cfg.IssuerPaths == nil || !p.cfg.IssuerPaths.Match(pr.In.URL.EscapedPath()) {
			StripCookies(pr.Out.Header, p.hiddenCookies...)
		}
		if id, ok := verify.FromContext(pr.In.Context()); ok {
			SetIdentity(pr.Out.Header, id)
		}
		if rid := httpserver.RequestIDFromContext(pr.In.Context()); rid != "" {
			pr.Out.Header.Set(httpserver.HeaderRequestID, rid)
		}
	}
}

// streamBody is the body ReverseProxy sends of a request that came over
// HTTP/2, whose Close, from the transport, also closes the client's
// stream's body. ReverseProxy's own wrapper ignores Close, and the HTTP/2
// transport, once the app has ended its answer (a gRPC call's status, or
// an early answer to an upload), closes the request body and waits for
// the goroutine sending it, which waits on the client: without this, a
// client keeping its side open (a bidirectional call, quiet after its
// first message, which the body deadlines no longer bound) never got the
// app's end of the call. An HTTP/2 body's Close only ends the stream's
// reads (an HTTP/1.1 body's would read it to its end first).
type streamBody struct {
	io.ReadCloser
	in io.Closer
}

func (b *streamBody) Close() error {
	err := b.ReadCloser.Close()
	b.in.Close()
	return err
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	// First the client's own failures, which the transport mostly reports
	// as context.Canceled: net/http cancels the request's context when a
	// read of its body fails.
	settle(w, r)
	if httpserver.BodyTimedOut(r.Context()) {
		// The body stalled or trickled past --read-idle-timeout or
		// --read-min-rate: the app is not at fault, and the client, still
		// connected, is told so. net/http closes the connection after
		// this answer, since the body was not read to its end.
		p.cfg.Metrics.failure(FailureBodyTimeout)
		p.cfg.Logger.DebugContext(r.Context(), "request body timed out", slog.String("err", err.Error()))
		p.refuse(w, r, refuseBodyTimeout)
		return
	}
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || bodyFailed(w, r)) {
		// The client went away; nobody is left to answer.
		p.cfg.Metrics.failure(FailureClientGone)
		httpserver.ClientGone(w)
		return
	}
	if bodyFailed(w, r) {
		// Malformed framing (a bad chunk): the client's fault, which it
		// is told; the connection is closed (see answerWriter).
		p.cfg.Metrics.failure(FailureBadBody)
		p.cfg.Logger.DebugContext(r.Context(), "request body malformed", slog.String("err", err.Error()))
		p.refuse(w, r, refuseBadBody)
		return
	}
	p.cfg.Metrics.failure(FailureUpstream)
	p.cfg.Logger.WarnContext(r.Context(), "upstream unavailable", slog.String("err", err.Error()),
		slog.String("request_id", httpserver.RequestIDFromContext(r.Context())))
	p.refuse(w, r, refuseUpstream)
}
