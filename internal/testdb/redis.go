package testdb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palisade-auth/palisade/internal/testnet"
)

// EnvRedis names the environment variable holding the URL of the Redis
// server the rate-limit tests use.
const EnvRedis = "PALISADE_TEST_REDIS"

// DefaultRedis is the server CI machines provide.
const DefaultRedis = "redis://127.0.0.1:6379/0"

// RedisURL is the Redis server tests use.
func RedisURL() string {
	if v := os.Getenv(EnvRedis); v != "" {
		return v
	}
	return DefaultRedis
}

// Redis returns the URL of the test Redis with a key prefix of its own
// (?prefix=, which the rate-limit store reads), so that tests sharing the
// server never see each other's keys; the keys are deleted when the test
// ends. An unreachable Redis skips the test loudly, or fails it under
// CI=true, like Postgres.
func Redis(t testing.TB) string {
	t.Helper()
	raw := RedisURL()
	if err := ProbeRedis(); err != nil {
		if CIRequired() {
			t.Fatalf("Redis at %s is unreachable and CI=true requires it: %v", redact(raw), err)
		}
		t.Skipf("Redis SUITE SKIPPED: %s is unreachable (%v); set %s or start redis-server", redact(raw), err, EnvRedis)
	}
	prefix := "palisade_test_" + randomSuffix(t) + ":"
	t.Cleanup(func() {
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvRedis, err)
	}
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

var redisProbe struct {
	once sync.Once
	err  error
}

// ProbeRedis reports whether the Redis server answers PING; it asks once
// per process.
func ProbeRedis() error {
	redisProbe.once.Do(func() {
		opt, err := redis.ParseURL(RedisURL())
		if err != nil {
			redisProbe.err = fmt.Errorf("%s: malformed URL", EnvRedis)
			return
		}
		opt.DialerRetries = 1
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		redisProbe.err = c.Ping(ctx).Err()
	})
	return redisProbe.err
}

// DescribeRedis says where the Redis tests run, for banners.
func DescribeRedis() string { return fmt.Sprintf("Redis at %s", redact(RedisURL())) }

// HangingRedis returns the URL of a server that accepts connections and
// reads from them, and never answers: a Redis that hangs. It closes when
// the test ends.
func HangingRedis(t testing.TB) string {
	t.Helper()
	return "redis://" + testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) + "/0"
}

// RedisRelay returns the URL of the test Redis (as Redis: key prefix
// included) reached through a relay on a loopback port, and a setter of the
// latency for which the relay holds each of Redis's replies (none at
// first; a change applies to the replies that arrive after it): a Redis
// far away. forward passes each client's stream on to Redis, and may read
// it on the way; nil passes it as is. The relay closes when the test ends.
func RedisRelay(t testing.TB, forward func(client io.Reader, redis io.Writer)) (rawURL string, setLatency func(time.Duration)) {
	t.Helper()
	u, err := url.Parse(Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	var toRedis testnet.Pass
	if forward != nil {
		toRedis = func(redis io.Writer, client io.Reader) { forward(client, redis) }
	}
	var latency atomic.Int64
	u.Host = testnet.Relay(t, u.Host, toRedis, func(client io.Writer, redis io.Reader) { holdReplies(client, redis, &latency) })
	return u.String(), func(d time.Duration) { latency.Store(int64(d)) }
}

// holdReplies copies Redis's replies to the client, each read held for
// the latency of the moment.
func holdReplies(client io.Writer, redis io.Reader, latency *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := redis.Read(buf)
		if n > 0 {
			time.Sleep(time.Duration(latency.Load()))
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
