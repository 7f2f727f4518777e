// Package redisstore owns the rate-limit counters and marks kept in Redis,
// shared by every issuer replica without touching the database.
//
// The GCRA step is redis_rate's Lua script: one round trip, atomic in Redis,
// on the Redis server's clock (one clock for every replica); its keys expire
// by themselves once their quota is whole again, so nothing sweeps them.
// Every call is bounded by the store's timeout, connecting included, and is
// never retried; after one call of a request fails, ratelimit.Limiter's
// FailFast fails the request's others at once. A Redis that is down or
// hangs costs a request at most that long, and the limit's failure policy
// decides the rest.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
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

	warming chan struct{} // a slot per warm-up under way (see warm)
	warmups sync.WaitGroup
}

// maxWarmups bounds the warm-ups under way at once; each holds one of the
// pool's connections for up to warmFor timeouts.
const (
	maxWarmups = 4
	warmFor    = 4
)

var _ ratelimit.Store = (*Store)(nil)

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
	return opt, prefix, nil
}

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
	return &Store{client: client, limiter: redis_rate.NewLimiter(client), prefix: prefix, timeout: timeout, warming: make(chan struct{}, maxWarmups)}
}

// SetLog sends the Redis client's own messages (failed dials, pool
// trouble: addresses, never credentials) to log as warnings instead of
// plain lines on stderr. The client's logger is process-wide.
func SetLog(log *slog.Logger) { redis.SetLogger(clientLog{log}) }

type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// Close closes the client's connections, and returns once the warm-ups
// under way, which then fail at once, have ended.
func (s *Store) Close() error {
	err := s.client.Close()
	s.warmups.Wait()
	return err
}

// Ping checks that Redis answers within the timeout.
func (s *Store) Ping(ctx context.Context) error {
	return s.call(ctx, "ping", func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
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
	return n > 0, err
}

// call runs fn with the store's timeout. When the timeout is what ended
// it, the error says so with context.DeadlineExceeded, whatever the client
// reported (an i/o timeout, a pool timeout).
func (s *Store) call(ctx context.Context, op string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := fn(ctx)
	if err == nil {
		return nil
	}
	// The connection's deadlines are the context's, so the client may see
	// its i/o timeout a moment before the context reports its end.
	var ne net.Error
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if timedOut {
		s.warm()
	}
	if timedOut && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redis %s: %w after %s (%w)", op, context.DeadlineExceeded, s.timeout, err)
	}
	return fmt.Errorf("redis %s: %w", op, err)
}

// warm readies a connection for the calls to come, in the background and
// with time for its handshake. A call that times out loses its connection
// (its answer may still come), and the next call's new connection spends a
// round trip on HELLO (two with SELECT) within that call's timeout: against
// a Redis more than half the timeout away every call then timed out, and
// lost the connection it had just set up, for as long as that lasted. The
// warm-up's PING leaves its connection in the pool, handshake done, where
// a call takes it and keeps it. With maxWarmups under way, another
// timed-out call starts none.
func (s *Store) warm() {
	select {
	case s.warming <- struct{}{}:
	default:
		return
	}
	s.warmups.Add(1)
	go func() {
		defer s.warmups.Done()
		defer func() { <-s.warming }()
		ctx, cancel := context.WithTimeout(context.Background(), warmFor*s.timeout)
		defer cancel()
		_ = s.client.Ping(ctx).Err()
	}()
}
