// Package redisstore owns the rate-limit counters and marks kept in Redis,
// shared by every issuer replica without touching the database.
//
// The GCRA step is redis_rate's Lua script: one round trip, atomic in Redis,
// on the Redis server's clock (one clock for every replica); its keys expire
// by themselves once their quota is whole again, so nothing sweeps them.
// Every call's caller waits at most the store's timeout, connecting
// included, and a call is never retried; after one call of a request
// fails, ratelimit.Limiter's FailFast fails the request's others at once.
// A Redis that is down or hangs costs a request at most that long, and the
// limit's failure policy decides the rest.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisurl"
)

// Store keeps counters and marks in one Redis database.
type Store struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
	prefix  string
	timeout time.Duration

	// slots holds a token per call under way, as many as the client's
	// pool has connections. A call waits for one no longer than its caller
	// does, so work nobody waits for never starts and go-redis never
	// queues a call for a connection; Close takes them all.
	slots     chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ ratelimit.Store = (*Store)(nil)

// runFor bounds, in timeouts, how long a call runs on after its caller has
// stopped waiting: a wait for a pooled connection, a dial, a handshake of
// two round trips and a command of two (NOSCRIPT, then EVAL) each take at
// most one, the client's deadline for every read and write.
const runFor = 8

// Options turns a store URL (see redisurl) into client options bounded by
// timeout, and the key prefix. Its errors never repeat the URL: it may
// carry a password.
func Options(rawURL string, timeout time.Duration) (*redis.Options, string, error) {
	clientURL, prefix, err := redisurl.Split(rawURL)
	if err != nil {
		return nil, "", err
	}
	opt, err := redis.ParseURL(clientURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, "", errors.New("malformed Redis URL")
		}
		return nil, "", err
	}
	if err := checkPool(opt); err != nil {
		return nil, "", err
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	// One attempt per call, and one dial per new connection: a retry
	// would only spend the same budget. go-redis dials five times, 100 ms
	// apart, by default, so a refused or untrusted server cost every call
	// its whole timeout and its error read as the timeout's.
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	// A new connection is set up within the timeout of the call that
	// needs it, so every round trip of its handshake counts: by default
	// go-redis adds CLIENT SETINFO and CLIENT MAINT_NOTIFICATIONS to HELLO,
	// and against a Redis ~70 ms away a 200 ms timeout never saw a
	// connection finish them, so every call failed. Without the two, a new
	// connection's call is HELLO (and SELECT for a database other than 0)
	// and the command.
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if opt.PoolSize == 0 {
		opt.PoolSize = poolPerCPU * runtime.GOMAXPROCS(0)
	}
	if opt.ReadBufferSize == 0 && opt.WriteBufferSize == 0 {
		opt.ReadBufferSize, opt.WriteBufferSize = connBuffer, connBuffer
	}
	return opt, prefix, nil
}

// poolPerCPU is the default pool: connections per CPU when the URL sets no
// pool_size. A call holds its connection for a round trip, so the pool
// bounds the calls a second to pool / round trip; past that callers queue,
// and those that wait out the timeout are refused (ratelimit.ErrBusy).
// go-redis's default, 10 a CPU, held a Redis 50 ms away to 400 calls a
// second: 100 concurrent requests, each checking two limits, had 96% of
// their answers refused. Connections are created as the load needs them
// and closed when idle.
const poolPerCPU = 100

// connBuffer is each connection's read and write buffer: the commands and
// answers of the rate limits are a few hundred bytes, and go-redis's 32
// KiB each would make a 200-connection pool 12.8 MiB of the issuer's heap.
const connBuffer = 4 << 10

// maxConns bounds the pool sizes a store URL may set: go-redis panics on
// some out of range (a negative pool_size, any above 2^31-1) and opens a
// connection per unit of min_idle_conns.
const maxConns = 10000

// checkPool refuses what the client would panic on, or could not use, in
// the parameters of a store URL: the pool sizes out of range, a negative
// database, a protocol other than RESP2 or RESP3.
func checkPool(opt *redis.Options) error {
	for _, p := range []struct {
		name  string
		n     int
		least int
	}{
		{"pool_size", opt.PoolSize, 0}, {"min_idle_conns", opt.MinIdleConns, 0},
		{"max_idle_conns", opt.MaxIdleConns, 0}, {"max_active_conns", opt.MaxActiveConns, 0},
		{"pipeline_pool_size", opt.PipelinePoolSize, -1}, // -1: no pipeline pool
	} {
		if p.n < p.least || p.n > maxConns {
			return fmt.Errorf("the Redis URL's %s must be from %d to %d, got %d", p.name, p.least, maxConns, p.n)
		}
	}
	// go-redis selects a database only above 0, so a negative one was
	// database 0 without a word.
	if opt.DB < 0 {
		return fmt.Errorf("the Redis URL's database must be 0 or more, got %d", opt.DB)
	}
	if opt.Protocol != 0 && opt.Protocol != 2 && opt.Protocol != 3 {
		return fmt.Errorf("the Redis URL's protocol must be 2 or 3, got %d", opt.Protocol)
	}
	return nil
}

// Open connects to the Redis at rawURL (see Options). It does not wait for
// the server: a Redis that is down at start is one that fails its calls.
func Open(rawURL string, timeout time.Duration) (*Store, error) {
	opt, prefix, err := Options(rawURL, timeout)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return New(redis.NewClient(opt), prefix, timeout), nil
}

// New returns the store over client; its keys start with prefix, and each
// call waits at most timeout.
func New(client *redis.Client, prefix string, timeout time.Duration) *Store {
	return &Store{
		client: client, limiter: redis_rate.NewLimiter(client), prefix: prefix, timeout: timeout,
		slots: make(chan struct{}, client.Options().PoolSize),
	}
}

// SetLog sends the Redis client's own messages (failed dials, pool
// trouble: addresses, never credentials) to log as warnings instead of
// plain lines on stderr. The client's logger is process-wide.
func SetLog(log *slog.Logger) { redis.SetLogger(clientLog{log}) }

type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// Close closes the client's connections, and returns once the calls under
// way, which then fail at once, have ended. A call made after it times out.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.client.Close()
		for range cap(s.slots) {
			s.slots <- struct{}{}
		}
	})
	return s.closeErr
}

// Ping checks that Redis answers within the timeout.
func (s *Store) Ping(ctx context.Context) error {
	return s.call(ctx, "ping", func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
}

// Misconfigured reports whether err, from a call, is Redis refusing the
// store's own settings: a user or password it does not know, a user
// without the permissions, a database it does not have. Unlike a Redis
// that is down, loading or failing over, such an error never goes away
// by itself, and every fail-open limit would count in each replica alone
// for as long as the issuer runs.
func Misconfigured(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, prefix := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "ERR DB index", "ERR invalid DB index"} {
		if strings.HasPrefix(re.Error(), prefix) {
			return true
		}
	}
	return false
}

// Take implements ratelimit.Counters on the Redis server's clock; now is
// not used.
func (s *Store) Take(ctx context.Context, key string, l ratelimit.Limit, _ time.Time) (ratelimit.Result, error) {
	var res *redis_rate.Result
	err := s.call(ctx, "take", func(ctx context.Context) (err error) {
		res, err = s.limiter.Allow(ctx, s.prefix+key, redis_rate.Limit{Rate: l.Count, Burst: l.Count, Period: l.Period})
		return err
	})
	if err != nil {
		return ratelimit.Result{}, err
	}
	r := ratelimit.Result{Allowed: res.Allowed > 0, ResetAfter: max(res.ResetAfter, 0)}
	if !r.Allowed {
		r.RetryAfter = max(res.RetryAfter, 0)
		return r, nil
	}
	// The script's remaining is its float quotient truncated by Redis, one
	// short whenever the float falls just under a whole number (for
	// instance with 7/13s). The room left beyond the reset time, in whole
	// intervals, is the same quantity computed with a tolerance.
	interval := float64(l.Period) / float64(l.Count)
	room := float64(l.Period-r.ResetAfter) / interval
	r.Remaining = min(l.Count, max(0, int(math.Floor(room+1e-6))))
	return r, nil
}

// Reset implements ratelimit.Counters.
func (s *Store) Reset(ctx context.Context, key string) error {
	return s.call(ctx, "reset", func(ctx context.Context) error { return s.limiter.Reset(ctx, s.prefix+key) })
}

// markKey is where a mark lives: the key redis_rate would use, so that
// Reset forgets marks too.
func (s *Store) markKey(key string) string { return "rate:" + s.prefix + key }

// Mark implements ratelimit.Marks with SET PX: the mark lasts exactly ttl
// after the latest Mark.
func (s *Store) Mark(ctx context.Context, key string, _ time.Time, ttl time.Duration) error {
	return s.call(ctx, "mark", func(ctx context.Context) error {
		return s.client.Set(ctx, s.markKey(key), 1, ttl).Err()
	})
}

// Marked implements ratelimit.Marks with EXISTS.
func (s *Store) Marked(ctx context.Context, key string, _ time.Time) (bool, error) {
	var n int64
	err := s.call(ctx, "marked", func(ctx context.Context) (err error) {
		n, err = s.client.Exists(ctx, s.markKey(key)).Result()
		return err
	})
	if err != nil {
		return false, err // n may still be written by the call running on
	}
	return n > 0, nil
}

// call runs fn, and returns its error or, when the store's timeout ends
// first, context.DeadlineExceeded; when fn's error says the timeout was
// what ended it (an i/o timeout, a pool timeout), the error says so with
// context.DeadlineExceeded too. A call that had to wait for a connection
// and then ran out of time is ratelimit.ErrBusy as well: its time went to
// the issuer's own queue (with go-redis's default pool, a Redis 50 ms away
// and 100 requests at once, 1,429 of 2,000 calls got a connection with too
// little time left for the round trip, and failed open).
//
// Once it has a slot, fn runs on after its caller has stopped waiting,
// each of its reads and writes still bounded by the timeout, for up to
// runFor timeouts. A call cut off mid-command loses its connection (the
// answer may still come),
// and the next call's new connection spends a round trip on HELLO (two
// with SELECT) within that call's timeout: against a Redis more than half
// the timeout away every call timed out, and lost the connection it had
// just set up, for good. Run to its end, a call leaves its connection,
// handshake done, to the next.
func (s *Store) call(ctx context.Context, op string, fn func(context.Context) error) error {
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	queued, err := s.acquire(ctx, timer.C)
	if err != nil {
		return fmt.Errorf("redis %s: %w", op, err)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-s.slots }()
		runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runFor*s.timeout)
		defer cancel()
		done <- fn(runCtx)
	}()
	select {
	case err = <-done:
	case <-timer.C:
		err = context.DeadlineExceeded
	case <-ctx.Done():
		return fmt.Errorf("redis %s: %w", op, ctx.Err())
	}
	if err == nil {
		return nil
	}
	var ne net.Error
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	switch {
	case timedOut && queued:
		return fmt.Errorf("redis %s: %w after %s, most of it waiting for a connection: %w", op, context.DeadlineExceeded, s.timeout, ratelimit.ErrBusy)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redis %s: %w after %s", op, context.DeadlineExceeded, s.timeout)
	case timedOut:
		return fmt.Errorf("redis %s: %w after %s (%w)", op, context.DeadlineExceeded, s.timeout, err)
	}
	return fmt.Errorf("redis %s: %w", op, err)
}

// acquire takes a slot, waiting until timeout fires or ctx ends; queued
// reports whether it had to wait.
func (s *Store) acquire(ctx context.Context, timeout <-chan time.Time) (queued bool, err error) {
	select {
	case s.slots <- struct{}{}:
		return false, nil
	default:
	}
	select {
	case s.slots <- struct{}{}:
		return true, nil
	case <-timeout:
		return true, fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, s.timeout, ratelimit.ErrBusy)
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
