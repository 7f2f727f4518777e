package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// ErrNotListening is returned by Serve when Listen has not bound an address.
var ErrNotListening = errors.New("httpserver: serve before listen")

// Options tunes a Server. A zero field takes the default named beside it.
type Options struct {
	ReadHeaderTimeout time.Duration // 10s; bounds slow-header (slowloris) clients
	WriteTimeout      time.Duration // none; a proxy may stream for longer
	IdleTimeout       time.Duration // 120s; keep-alive between requests
	ShutdownTimeout   time.Duration // 20s; how long in-flight requests may finish
	MaxHeaderBytes    int           // 64 KiB
	// MaxHeaderFields bounds the fields of an HTTP/1 request's header:
	// past it the request is answered 431 and its connection closed
	// (DefaultMaxHeaderFields).
	MaxHeaderFields int
	// BodyTimeout bounds the reading of a request body as a whole, from
	// the moment the handler starts (none by default). Unlike ReadTimeout
	// it does not cancel a handler that runs longer.
	BodyTimeout time.Duration
	// BodyIdleTimeout bounds each read of a request body: a body that
	// makes no progress for this long ends the request (none by default),
	// so a long upload stays possible while a stalled one does not hold
	// the connection.
	BodyIdleTimeout time.Duration
	// BodyMinRate, in bytes per second, is the least a body must average
	// once the first BodyIdleTimeout of waiting for it is spent (none by
	// default; it needs BodyIdleTimeout): each byte received buys 1/rate
	// s more, so a body trickled a byte at a time, never idle for long,
	// still ends with ErrBodyTimeout. Only the time spent waiting for the
	// client counts, not the time the handler takes between reads.
	BodyMinRate int64
	// Protocols are the protocols the listener speaks (nil: net/http's
	// default, which is HTTP/1 alone on a listener without TLS). HTTP/2
	// with prior knowledge is served connection by connection (h2cConns).
	Protocols *http.Protocols
	// AnswersServerOptions says the handler answers OPTIONS * itself (it
	// includes ServerOptions), so that answer has a request id and an
	// access log line; otherwise net/http answers it before any handler.
	AnswersServerOptions bool
}

func (o Options) withDefaults() Options {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 20 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.MaxHeaderFields <= 0 {
		o.MaxHeaderFields = DefaultMaxHeaderFields
	}
	return o
}

// handlerDrain is how long handlers ended at the close of the grace (their
// contexts cancelled) have to return, and so to write their access log
// lines, before Serve gives up on them.
const handlerDrain = 2 * time.Second

// Server is one named HTTP listener with a graceful shutdown. Listen, then
// Serve (or Run several); a Server serves once.
type Server struct {
	name     string
	logger   *slog.Logger
	srv      *http.Server
	shutdown time.Duration
	ln       net.Listener
	// running counts the handlers in progress; endAll cancels their
	// contexts. http.Server.Shutdown neither waits for nor ends a handler
	// whose connection it hijacked (a WebSocket tunnel), and Close returns
	// before the handlers it cut have returned: Serve needs both to keep
	// the grace for every request and each one's log line.
	running inFlight
	endAll  context.CancelFunc
	h2c     *h2cConns // nil unless the listener speaks HTTP/2 with prior knowledge
	conns   atomic.Int64
	fields  int // MaxHeaderFields
}

// New returns a server named name (used in its log lines, e.g. "api" or
// "admin") that serves handler. It does not bind yet.
func New(name string, logger *slog.Logger, handler http.Handler, opts Options) *Server {
	opts = opts.withDefaults()
	base, endAll := context.WithCancel(context.Background())
	s := &Server{name: name, logger: logger, shutdown: opts.ShutdownTimeout, endAll: endAll, fields: opts.MaxHeaderFields}
	s.srv = &http.Server{
		Handler:           s.running.track(checkHeader(opts.MaxHeaderFields, recorded(bodyDeadlines(opts.BodyTimeout, opts.BodyIdleTimeout, opts.BodyMinRate, handler)))),
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       withFieldConn,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		Protocols:         opts.Protocols,

		DisableGeneralOptionsHandler: opts.AnswersServerOptions,
		// net/http's own complaints (TLS handshakes, accept errors,
		// panics) go to the JSON log rather than stderr. The malformed
		// requests it answers itself (400, 431, 501) it reports nowhere.
		ErrorLog: slog.NewLogLogger(logger.With(slog.String("server", name)).Handler(), slog.LevelWarn),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateIdle:
				nextRequest(c)
			case http.StateHijacked:
				stopCounting(c)
				s.conns.Add(-1)
			case http.StateClosed:
				s.conns.Add(-1)
			}
		},
	}
	if opts.Protocols != nil && opts.Protocols.UnencryptedHTTP2() {
		s.h2c = &h2cConns{idle: opts.IdleTimeout}
		s.h2c.install(s.srv)
	}
	return s
}

// Conns is the number of connections the server holds: accepted, and
// neither closed nor hijacked (a hijacked one is its handler's). Safe for
// concurrent use.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Listen binds addr and logs msg "listening" with the server's name and the
// bound address. Binding apart from serving lets ":0" work: the log line and
// Addr tell the real port, which end-to-end tests read from the log.
func (s *Server) Listen(addr string) error {
	if s.ln != nil {
		return fmt.Errorf("listen %s on %s: already listening on %s", s.name, addr, s.ln.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.name, err)
	}
	s.ln = ln
	s.logger.Info("listening", slog.String("server", s.name), slog.String("addr", ln.Addr().String()))
	return nil
}

// logRefused writes the access line of a request fieldConn answered 431
// before net/http read it, so no handler, AccessLog's included, saw it:
// without it a flood of oversized headers left no trace in the access log.
// Method and path were not read.
func (s *Server) logRefused(c net.Conn, bytes int) {
	s.logger.Info("request", slog.Int("status", http.StatusRequestHeaderFieldsTooLarge), slog.Int("bytes", bytes),
		slog.String("remote_addr", c.RemoteAddr().String()), slog.String("reason", "too_many_header_fields"))
}

// Addr returns the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve answers requests until ctx is done, then shuts down gracefully: it
// stops accepting, lets in-flight requests finish for up to the shutdown
// timeout, hijacked connections (WebSocket tunnels) included, and returns
// nil. It returns an error when serving fails or in-flight requests
// outlast the timeout: their contexts are then cancelled and their
// connections closed, and Serve returns once their handlers have (for up
// to handlerDrain more), so that their log lines are written.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		return fmt.Errorf("serve %s: %w", s.name, ErrNotListening)
	}
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(fieldListener{Listener: s.ln, max: s.fields, refused: s.logRefused}) }()

	select {
	case err := <-served:
		s.endAll()
		return fmt.Errorf("serve %s: %w", s.name, err)
	case <-ctx.Done():
	}

	s.logger.Info("shutting down", slog.String("server", s.name))
	// ctx is already done; the grace period must not inherit its cancellation.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdown)
	defer cancel()
	graceErr := s.srv.Shutdown(shutdownCtx)
	if graceErr == nil {
		graceErr = s.running.wait(shutdownCtx)
	}
	if graceErr != nil {
		_ = s.srv.Close()
	}
	s.endAll()
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), handlerDrain)
	defer cancelDrain()
	drainErr := s.running.wait(drainCtx)
	serveErr := <-served
	switch {
	case graceErr != nil && drainErr != nil:
		return fmt.Errorf("shut down %s: %w (%d handlers had not returned %s after their contexts ended)", s.name, graceErr, s.running.n.Load(), handlerDrain)
	case graceErr != nil:
		return fmt.Errorf("shut down %s: %w", s.name, graceErr)
	case !errors.Is(serveErr, http.ErrServerClosed):
		return fmt.Errorf("serve %s: %w", s.name, serveErr)
	}
	s.logger.Info("stopped", slog.String("server", s.name))
	return nil
}

// inFlight counts the handlers running. Entering and leaving cost an
// atomic add each; only once wait has been called does the leave that
// brings the count to zero take the lock, to wake it.
type inFlight struct {
	n        atomic.Int64
	draining atomic.Bool
	mu       sync.Mutex
	idle     chan struct{} // made by wait, closed when n reaches zero
}

func (f *inFlight) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		defer f.leave()
		h.ServeHTTP(w, r)
	})
}

func (f *inFlight) leave() {
	if f.n.Add(-1) == 0 && f.draining.Load() {
		f.mu.Lock()
		if f.idle != nil {
			close(f.idle)
			f.idle = nil
		}
		f.mu.Unlock()
	}
}

// wait returns nil once no handler runs, or ctx's error if it ends first.
func (f *inFlight) wait(ctx context.Context) error {
	// draining is set before n is read under the lock, and a leave reads
	// draining after its decrement: one of the two sees the other.
	f.draining.Store(true)
	f.mu.Lock()
	if f.n.Load() == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the server at once, dropping open connections. It is for
// releasing a bound listener when serving never starts (say, a second Listen
// failed); a serving server stops through its context.
func (s *Server) Close() error {
	err := s.srv.Close()
	if s.ln != nil {
		if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	return err
}

// Run serves every server until ctx is done or one of them fails, then shuts
// them all down gracefully and returns the first error, or nil when ctx
// ended a clean run.
func Run(ctx context.Context, servers ...*Server) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, s := range servers {
		g.Go(func() error { return s.Serve(ctx) })
	}
	return g.Wait()
}

// ServerOptions answers OPTIONS *, a question about the server rather than
// a resource, as net/http does (200, no body), and passes every other
// request to next. Inside the request id and access log middleware, with
// Options.AnswersServerOptions, it gives that answer both.
func ServerOptions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions || r.RequestURI != "*" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	})
}
