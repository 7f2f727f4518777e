package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/ratelimittest"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisstore"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisurl"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func open(t *testing.T, rawURL string, timeout time.Duration) *redisstore.Store {
	t.Helper()
	st, err := redisstore.Open(rawURL, timeout)
	if err != nil {
		t.Fatalf("redisstore.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return open(t, testdb.Redis(t), time.Second) })
}

// Two stores over one Redis (two replicas) share one counter.
func TestReplicasShareCounters(t *testing.T) {
	u := testdb.Redis(t)
	a, b := open(t, u, time.Second), open(t, u, time.Second)
	l := ratelimit.Limit{Count: 4, Period: time.Minute}
	ctx := context.Background()
	for i, st := range []*redisstore.Store{a, b, a, b} {
		if r, err := st.Take(ctx, "k", l, time.Now()); err != nil || !r.Allowed {
			t.Fatalf("Take #%d = %+v, %v, want allowed", i+1, r, err)
		}
	}
	for _, st := range []*redisstore.Store{a, b} {
		if r, err := st.Take(ctx, "k", l, time.Now()); err != nil || r.Allowed {
			t.Fatalf("Take #5 = %+v, %v, want refused", r, err)
		}
	}
}

// Every call on a Redis that never answers ends with the store's timeout,
// reported as context.DeadlineExceeded, however long the caller would
// wait: the request's own deadline is far away.
func TestCallsEndAtTheTimeout(t *testing.T) {
	st := open(t, testdb.HangingRedis(t), 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	l := ratelimit.Limit{Count: 1, Period: time.Minute}
	calls := map[string]func() error{
		"Take":   func() error { _, err := st.Take(ctx, "k", l, time.Now()); return err },
		"Reset":  func() error { return st.Reset(ctx, "k") },
		"Mark":   func() error { return st.Mark(ctx, "k", time.Now(), time.Minute) },
		"Marked": func() error { _, err := st.Marked(ctx, "k", time.Now()); return err },
		"Ping":   func() error { return st.Ping(ctx) },
	}
	for name, call := range calls {
		for i := 0; i < 2; i++ { // a fresh connection, then a pooled one if any
			if err := call(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s #%d on a silent Redis = %v, want context.DeadlineExceeded", name, i+1, err)
			}
		}
	}
	if ctx.Err() != nil {
		t.Errorf("the caller's context ended: %v", ctx.Err())
	}
}

// A new connection is set up within the timeout of the call that needs
// it, so its handshake must be HELLO alone: go-redis's default CLIENT
// SETINFO and CLIENT MAINT_NOTIFICATIONS round trips made a Redis ~70 ms
// away fail every call of a 200 ms timeout before a connection was ready.
func TestNewConnectionHandshakeIsHello(t *testing.T) {
	rec := new(recorder)
	u, _ := testdb.RedisRelay(t, rec.forward)
	st := open(t, u, 5*time.Second)
	if _, err := st.Take(context.Background(), "k", ratelimit.Limit{Count: 1, Period: time.Minute}, time.Now()); err != nil {
		t.Fatalf("Take: %v", err)
	}
	cmds := rec.commands()
	if len(cmds) < 2 || cmds[0] != "HELLO" {
		t.Fatalf("commands sent = %q, want HELLO first", cmds)
	}
	for _, c := range cmds[1:] {
		if c != "EVALSHA" && c != "EVAL" && c != "SELECT" {
			t.Fatalf("commands sent = %q: %s is a round trip of set-up no call can afford", cmds, c)
		}
	}
}

// A Redis farther than half the timeout away, from the first connection
// on: a new connection's HELLO and the call's command do not fit in one
// call's timeout together, and a call cut off mid-command lost its
// connection, so every call failed for good. Calls now run to their end
// after their callers stop waiting, and leave their connections ready:
// after the first few, sequential calls pass, and so do concurrent ones
// once the pool holds a connection for each.
func TestDistantRedisGetsReadyConnections(t *testing.T) {
	// Each call has 200 ms to spare on a loaded machine; a handshake and a
	// command (600 ms) never fit in 500.
	const rtt, timeout = 300 * time.Millisecond, 500 * time.Millisecond
	u, setLatency := testdb.RedisRelay(t, nil)
	setLatency(rtt)
	st := open(t, u, timeout)
	l := ratelimit.Limit{Count: 1000, Period: time.Minute}
	take := func() error {
		_, err := st.Take(context.Background(), "k", l, time.Now())
		return err
	}
	// round makes n calls at once and returns how many failed, and one of
	// their errors.
	round := func(n int) (int, error) {
		errs := make(chan error, n)
		for range n {
			go func() { errs <- take() }()
		}
		failed, last := 0, error(nil)
		for range n {
			if err := <-errs; err != nil {
				failed, last = failed+1, err
			}
		}
		return failed, last
	}
	var err error
	for range 10 {
		if err = take(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("10 calls one after the other to a Redis %s away with a %s timeout all failed, the last with %v", rtt, timeout, err)
	}
	for i := range 3 {
		if err := take(); err != nil {
			t.Fatalf("call %d after the first success: %v", i+1, err)
		}
	}
	const n = 8
	failed := n
	for range 5 {
		if failed, err = round(n); failed == 0 {
			break
		}
	}
	if failed != 0 {
		t.Fatalf("5 rounds of %d calls at once: %d of the last failed, one with %v", n, failed, err)
	}
	if failed, err := round(n); failed != 0 {
		t.Errorf("the round after one that all passed: %d of %d failed, one with %v", failed, n, err)
	}
}

// Answers that come after their callers stopped waiting are dropped:
// every call reports the timeout, and the calls running on end before
// Close returns. Under the race detector this also checks that nothing a
// caller returns is written by a call running on.
func TestLateAnswersAreDropped(t *testing.T) {
	u, setLatency := testdb.RedisRelay(t, nil)
	st := open(t, u, 300*time.Millisecond)
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil { // a connection made while Redis is near
		t.Fatal(err)
	}
	setLatency(500 * time.Millisecond)
	l := ratelimit.Limit{Count: 1, Period: time.Minute}
	calls := map[string]func() error{
		"Take":   func() error { _, err := st.Take(ctx, "k", l, time.Now()); return err },
		"Mark":   func() error { return st.Mark(ctx, "k", time.Now(), time.Minute) },
		"Marked": func() error { ok, err := st.Marked(ctx, "k", time.Now()); _ = ok; return err },
		"Reset":  func() error { return st.Reset(ctx, "k") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a Redis slower than the timeout = %v, want context.DeadlineExceeded", name, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A call waits for a connection no longer than its caller does, and once
// its caller has gone it never starts: a caller that stops waiting while
// the one connection is busy leaves no command behind it, to run when the
// connection comes free (go-redis's own wait for a connection outlasted
// the caller's, and the command went out for nobody).
func TestCallsNobodyWaitsForNeverStart(t *testing.T) {
	rec := new(recorder)
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	u, _ := testdb.RedisRelay(t, func(client io.Reader, redis io.Writer) {
		rec.forward(client, holdWrites{w: redis, until: hold, held: held})
	})
	st := open(t, strings.Replace(u, "?", "?pool_size=1&", 1), time.Second)
	l := ratelimit.Limit{Count: 10, Period: time.Minute}
	first := make(chan error, 1)
	go func() { _, err := st.Take(context.Background(), "a", l, time.Now()); first <- err }()
	<-held // the first call holds the connection
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := st.Take(ctx, "b", l, time.Now()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call while the one connection is held = %v, want its caller's deadline", err)
	}
	close(hold) // the first call completes, well within its timeout
	if err := <-first; err != nil {
		t.Errorf("the first call: %v", err)
	}
	// A third call takes the connection after whatever was waiting for it.
	if _, err := st.Take(context.Background(), "c", l, time.Now()); err != nil {
		t.Errorf("the third call: %v", err)
	}
	cmds := rec.commands()
	if n := len(cmds) - len(slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return c == "EVALSHA" })); n != 2 {
		t.Errorf("EVALSHA sent %d times (commands %q), want the first call's and the third's", n, cmds)
	}
}

// A call that finds every connection busy for the whole timeout is
// ratelimit.ErrBusy: the issuer's overload, which every limit refuses,
// not a store failure, which fail-open limits let through. And the pool a
// URL without pool_size gets is sized for a Redis some way off.
func TestBusyIsNotAFailure(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	u, _ := testdb.RedisRelay(t, func(client io.Reader, redis io.Writer) {
		io.Copy(holdWrites{w: redis, until: hold, held: held}, client)
	})
	st := open(t, strings.Replace(u, "?", "?pool_size=1&", 1), 300*time.Millisecond)
	l := ratelimit.Limit{Count: 10, Period: time.Minute}
	first := make(chan error, 1)
	go func() { _, err := st.Take(context.Background(), "a", l, time.Now()); first <- err }()
	<-held // the first call holds the one connection
	if _, err := st.Take(context.Background(), "b", l, time.Now()); !errors.Is(err, ratelimit.ErrBusy) {
		t.Errorf("a call while the one connection stays held = %v, want ratelimit.ErrBusy", err)
	}
	close(hold)
	if err := <-first; err == nil || errors.Is(err, ratelimit.ErrBusy) {
		t.Errorf("the call that held the connection past the timeout = %v, want a timeout, not ErrBusy", err)
	}
	opt, _, err := redisstore.Options("redis://cache/0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := 100 * runtime.GOMAXPROCS(0); opt.PoolSize != want || opt.ReadBufferSize != 4<<10 || opt.WriteBufferSize != 4<<10 {
		t.Errorf("default pool %d, buffers %d/%d; want %d connections of 4 KiB buffers", opt.PoolSize, opt.ReadBufferSize, opt.WriteBufferSize, want)
	}
}

// holdWrites passes nothing on to w until until is closed, and says on
// held (without waiting) each time it holds a write.
type holdWrites struct {
	w     io.Writer
	until <-chan struct{}
	held  chan<- struct{}
}

func (h holdWrites) Write(p []byte) (int, error) {
	select {
	case h.held <- struct{}{}:
	default:
	}
	<-h.until
	return h.w.Write(p)
}

// recorder records the name of each command clients send to Redis (the
// first element of each RESP array).
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}

// forward records each command of a client's RESP stream, then passes it
// on to up: recorded before Redis can answer it.
func (r *recorder) forward(in io.Reader, up io.Writer) {
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(in, &raw))
	for {
		var n int
		if _, err := fmt.Fscanf(br, "*%d\r\n", &n); err != nil {
			return
		}
		for i := range n {
			var size int
			if _, err := fmt.Fscanf(br, "$%d\r\n", &size); err != nil {
				return
			}
			arg := make([]byte, size+2)
			if _, err := io.ReadFull(br, arg); err != nil {
				return
			}
			if i == 0 {
				r.mu.Lock()
				r.cmds = append(r.cmds, strings.ToUpper(string(arg[:size])))
				r.mu.Unlock()
			}
		}
		// What the reader took beyond this command stays for the next.
		if _, err := up.Write(raw.Next(raw.Len() - br.Buffered())); err != nil {
			return
		}
	}
}

// A Redis that is down fails the call at once with an error; the limit's
// policy decides.
func TestDownRedisFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	st := open(t, "redis://"+addr+"/0", 200*time.Millisecond)
	_, err = st.Take(context.Background(), "k", ratelimit.Limit{Count: 1, Period: time.Minute}, time.Now())
	if err == nil {
		t.Fatal("Take on a closed port: no error")
	}
	// The refusal itself, at once: go-redis's default dials five times,
	// 100 ms apart, so the call ran out its timeout and said only that.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Take on a closed port = %v, want the connection refused", err)
	}
}

// Redis refusing the store's settings is told apart from Redis being
// down or silent: the issuer refuses to start on it.
func TestMisconfigured(t *testing.T) {
	base, err := url.Parse(testdb.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, edit := range map[string]func(u *url.URL){
		"database out of range": func(u *url.URL) { u.Path = "/99999" },
		"unknown user":          func(u *url.URL) { u.User = url.UserPassword("palisade-no-such-user", "pw") },
	} {
		u := *base
		edit(&u)
		err := open(t, u.String(), 2*time.Second).Ping(ctx)
		if err == nil || !redisstore.Misconfigured(err) {
			t.Errorf("%s: Ping = %v, want an error Misconfigured tells", name, err)
		}
	}
	if err := open(t, base.String(), 2*time.Second).Ping(ctx); err != nil || redisstore.Misconfigured(err) {
		t.Errorf("Ping of the right settings = %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	for name, raw := range map[string]string{"down": "redis://" + ln.Addr().String() + "/0", "silent": testdb.HangingRedis(t)} {
		if err := open(t, raw, 200*time.Millisecond).Ping(ctx); err == nil || redisstore.Misconfigured(err) {
			t.Errorf("%s: Ping = %v, Misconfigured %v; want an error that may go away", name, err, redisstore.Misconfigured(err))
		}
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		in      string
		addr    string
		db      int
		user    string
		tls     bool
		prefix  string
		wantErr bool
	}{
		{in: "redis://127.0.0.1:6379", addr: "127.0.0.1:6379"},
		{in: "redis://cache.internal", addr: "cache.internal:6379"},
		{in: "redis://u:s3cret@cache:6380/2", addr: "cache:6380", db: 2, user: "u"},
		{in: "rediss://:s3cret@cache:6380/1?prefix=eu:", addr: "cache:6380", db: 1, tls: true, prefix: "eu:"},
		{in: "redis://[::1]:6379/0", addr: "[::1]:6379"},
		{in: "http://cache:6379", wantErr: true},
		{in: "redis://cache:6379/x", wantErr: true},
		{in: "redis://u:s3cret@cache:6379/1/2", wantErr: true},
		{in: "redis://u:s3cret@cache:notaport", wantErr: true},
		{in: "redis://u:s3cret@cache:6379/0?nope=1", wantErr: true},
		{in: "redis://u:s3cret@:6379", wantErr: true},
		{in: "redis://u:s3cret%zz@cache", wantErr: true},
		// go-redis panics on these when the client is made, after the
		// database was opened and migrated; they are refused at start.
		{in: "redis://u:s3cret@cache/0?pool_size=-3", wantErr: true},
		{in: "redis://cache/0?pool_size=100000000000", wantErr: true},
		{in: "redis://cache/0?min_idle_conns=100000000000", wantErr: true},
		{in: "redis://cache/0?max_idle_conns=-1", wantErr: true},
		{in: "redis://cache/0?max_active_conns=10001", wantErr: true},
		{in: "redis://cache/0?protocol=7", wantErr: true},
		{in: "redis://u:s3cret@cache/-1", wantErr: true},
		{in: "redis://cache/0?pipeline_pool_size=100000000000", wantErr: true},
		{in: "redis://cache/0?pipeline_pool_size=2000000000", wantErr: true},
		{in: "redis://cache/0?pipeline_pool_size=-2", wantErr: true},
		{in: "redis://cache/0?pipeline_pool_size=-1", addr: "cache:6379"},
		{in: "redis://cache/0?pool_size=10000&protocol=2", addr: "cache:6379"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			opt, prefix, err := redisstore.Options(tt.in, 150*time.Millisecond)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Options(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("Options(%q) error = %q, repeats the password", tt.in, err)
				}
				return
			}
			if opt.Addr != tt.addr || opt.DB != tt.db || opt.Username != tt.user || (opt.TLSConfig != nil) != tt.tls || prefix != tt.prefix {
				t.Errorf("Options(%q) = addr %s db %d user %q tls %v prefix %q, want %s %d %q %v %q",
					tt.in, opt.Addr, opt.DB, opt.Username, opt.TLSConfig != nil, prefix, tt.addr, tt.db, tt.user, tt.tls, tt.prefix)
			}
			for name, d := range map[string]time.Duration{"dial": opt.DialTimeout, "read": opt.ReadTimeout, "write": opt.WriteTimeout, "pool": opt.PoolTimeout} {
				if d != 150*time.Millisecond {
					t.Errorf("Options(%q) %s timeout = %v, want 150ms", tt.in, name, d)
				}
			}
			if !opt.ContextTimeoutEnabled || opt.MaxRetries != -1 || opt.DialerRetries != 1 {
				t.Errorf("Options(%q): context timeouts %v, retries %d, dials %d; want true, -1, 1", tt.in, opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries)
			}
		})
	}
}

// FuzzOptionsNeverRepeatThePassword: a --rate-limit-store URL's password
// reaches neither an error (printed at start, so in the logs) nor the
// redacted URL the issuer logs, whatever surrounds it. The case that
// needs care is a password with an unescaped /, ? or #: it ends the
// authority early, and what follows, the rest of the password included,
// parses as the path, query or fragment.
func FuzzOptionsNeverRepeatThePassword(f *testing.F) {
	const secret = "S3CRETpw"
	for _, seed := range [][2]string{
		{"redis://u:", "@cache:6379/1"},
		{"rediss://:", "@cache/2?prefix=eu:"},
		{"redis://u:", "%zz@cache"},
		{"redis://default:4821/", "@cache:6379"},
		{"redis://default:4821?prefix=", "@cache:6379"},
		{"redis://default:4821#", "@cache:6379"},
		{"redis://default:4821?", "=1@cache:6379"},
		{"redis:/u:", "@cache"},
		{"redis://u:ab/", "@cache"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, head, tail string) {
		raw := head + secret + tail
		if strings.Count(raw, secret) != 1 || !inPassword(head, tail) {
			return
		}
		if _, _, err := redisstore.Options(raw, time.Second); err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("Options(%q) error = %q, repeats the password", raw, err)
		}
		if got := redisurl.Redact(raw); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q, repeats the password", raw, got)
		}
	})
}

// inPassword reports whether what stands between head and tail is, to
// whoever wrote head+tail, (part of) a URL's password: after the
// "scheme:" and a colon of the user info, and before the @ that ends it.
func inPassword(head, tail string) bool {
	_, userinfo, ok := strings.Cut(head, ":")
	return ok && strings.Contains(strings.TrimLeft(userinfo, "/"), ":") && strings.Contains(tail, "@")
}
