package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// redisServer is a private redis-server on a loopback port of its own, for
// tests that stop it; the shared one on 6379 is never touched.
type redisServer struct {
	port string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server, on port ("" for a free one),
// and waits until it answers PING.
func startRedis(t testing.TB, port string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testdb.CIRequired() {
			t.Fatalf("redis-server not found and CI=true requires it: %v", err)
		}
		t.Skipf("REDIS TEST SKIPPED: redis-server not found (%v)", err)
	}
	if port == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		ln.Close()
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s := &redisServer{port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(10 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s does not answer PING", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func (s *redisServer) url() string { return "redis://127.0.0.1:" + s.port + "/0" }

// answers reports whether the server answers PING.
func (s *redisServer) answers() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+s.port, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := io.ReadFull(c, buf)
	return string(buf[:n]) == "+PONG\r\n"
}

// stop kills the server and waits for it to exit.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// hangGuard is a client whose timeout only stops a hung test: no answer in
// these tests should take more than a fraction of it.
var hangGuard = &http.Client{Timeout: 10 * time.Second}

func postJSON(t *testing.T, url string, body string) response {
	t.Helper()
	res, err := hangGuard.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

func loginBody(email, password string) string {
	return fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)
}

// Two issuers over one Redis share one counter: requests alternating
// between them get 429 exactly after the configured total, and the
// database holds no counter.
func TestRateLimitsRedisShared(t *testing.T) {
	dbURL := testdb.Postgres(t)
	redisURL := testdb.Redis(t)
	kek := kekFile(t)
	args := []string{"--rate-limit-store", redisURL, "--rate-limit", "login=4/1m"}
	a := startIssuerWithKEK(t, dbURL, kek, args...)
	b := startIssuerWithKEK(t, dbURL, kek, args...)
	email := uniqueEmail()
	register(t, a, email)
	for i, is := range []*issuer{a, b, a, b} {
		r := postJSON(t, is.base+"/v1/login", loginBody(email, "wrong password"))
		wantProblem(t, fmt.Sprintf("login #%d", i+1), r, http.StatusUnauthorized, "invalid_credentials")
	}
	for _, is := range []*issuer{a, b} {
		want429(t, "login #5", postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword)), 4)
	}
	n, err := testdb.Store(t, dbURL).SweepRateLimits(context.Background(), math.MaxInt64)
	if err != nil || n != 0 {
		t.Errorf("counters in the database = %d, %v, want 0: the Redis store touched PostgreSQL", n, err)
	}
}

// Redis stopped mid-run: the fail-closed login answers 503
// rate_limit_unavailable, the fail-open register and refresh pass, counted
// by the issuer itself (the third registration from the address is 429);
// once Redis is back the limits count there again.
func TestRateLimitsRedisOutage(t *testing.T) {
	rs := startRedis(t, "")
	is := startIssuer(t, testdb.SQLite(t), "--rate-limit-store", rs.url(), "--rate-limit-store-timeout", "200ms", "--rate-limit", "login=3/1m", "--rate-limit", "register=2/1h")
	if strings.Contains(is.logs.String(), redisNotAnswering) {
		t.Errorf("the issuer warned %q on a Redis that is up:\n%s", redisNotAnswering, is.logs.String())
	}
	email := uniqueEmail()
	register(t, is, email)
	r := postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword))
	wantStatus(t, "login with Redis up", r, http.StatusOK)
	rt := r.json(t)["refresh_token"].(string)

	rs.stop()
	r = postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword))
	wantProblem(t, "login with Redis down", r, http.StatusServiceUnavailable, "rate_limit_unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("login with Redis down: no Retry-After")
	}
	for i := 1; i <= 2; i++ {
		wantStatus(t, fmt.Sprintf("register #%d with Redis down", i), postJSON(t, is.base+"/v1/register", loginBody(uniqueEmail(), strongPassword)), http.StatusCreated)
	}
	want429(t, "register #3 with Redis down", postJSON(t, is.base+"/v1/register", loginBody(uniqueEmail(), strongPassword)), 2)
	r = postJSON(t, is.base+"/v1/refresh", fmt.Sprintf(`{"refresh_token":%q}`, rt))
	wantStatus(t, "refresh with Redis down", r, http.StatusOK)

	// Back (empty: it kept nothing): the first login that passes counts
	// as the first of three.
	startRedis(t, rs.port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword))
		if r.status != http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("login 10s after Redis restarted = %d %s, want it served", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantStatus(t, "first login with Redis back", r, http.StatusOK)
	for i := 2; i <= 3; i++ {
		wantStatus(t, fmt.Sprintf("login #%d with Redis back", i), postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword)), http.StatusOK)
	}
	want429(t, "login #4 with Redis back", postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword)), 3)
}

// redisNotAnswering is the issuer's warning at start when Redis does not
// answer.
const redisNotAnswering = "Redis did not answer at start"

// A Redis that accepts and never answers costs a request the store's
// timeout, not a hang: login answers 503, register passes. (The client's
// 10 s timeout is a hang guard; the store-level test asserts that the
// error is the timeout.)
func TestRateLimitsRedisSilent(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--rate-limit-store", testdb.HangingRedis(t), "--rate-limit-store-timeout", "200ms")
	if !strings.Contains(is.logs.String(), redisNotAnswering) {
		t.Errorf("the issuer started on a silent Redis without a warning %q:\n%s", redisNotAnswering, is.logs.String())
	}
	email := uniqueEmail()
	wantStatus(t, "register with a silent Redis", postJSON(t, is.base+"/v1/register", loginBody(email, strongPassword)), http.StatusCreated)
	for i := 1; i <= 2; i++ {
		r := postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword))
		wantProblem(t, fmt.Sprintf("login #%d with a silent Redis", i), r, http.StatusServiceUnavailable, "rate_limit_unavailable")
	}
}

// BenchmarkRefreshRateLimitStore drives refreshes through the real issuer
// on PostgreSQL with each rate-limit store: the counters in the database
// as before migration 00010 (a logged table), in the database (unlogged),
// in Redis, and in the issuer's memory (one replica's own counters, the
// floor any shared store is measured against). The four issuers run side by side, each on a database of
// its own, and take turns in rounds of equal size, so that whatever else
// the machine does falls on all alike. 4 clients per CPU each
// refresh their own session's chain. It reports each rate, PostgreSQL's
// CPU per refresh (and the issuer's, Redis's and the clients'), and the ratios redis/database, redis/logged,
// database/logged and memory/database.
func BenchmarkRefreshRateLimitStore(b *testing.B) {
	stores := []string{"logged", "database", "redis", "memory"}
	issuers := map[string]*issuer{}
	chains := map[string][]string{}
	for _, store := range stores {
		arg, dbURL := "database", testdb.Postgres(b)
		switch store {
		case "redis":
			arg = testdb.Redis(b)
		case "memory":
			arg = "memory"
		}
		issuers[store] = startIssuer(b, dbURL, "--rate-limit-store", arg, "--log-level", "info")
		if store == "logged" {
			testdb.Exec(b, dbURL, "ALTER TABLE rate_limits SET LOGGED")
		}
		chains[store] = refreshChains(b, issuers[store])
	}
	const rounds = 4
	n := max(b.N/rounds, 1)
	elapsed := map[string]time.Duration{}
	// Who spends the CPU of a refresh: the issuer, PostgreSQL, Redis, and
	// this process, the clients. The issuers idle while another one runs.
	self, _ := os.ReadFile("/proc/self/comm")
	parts := map[string]string{"pg": "postgres", "issuer": "issuer", "redis": "redis-server", "client": strings.TrimSpace(string(self))}
	cpu := map[string]time.Duration{} // by store+"-"+part
	cpuKnown := true
	b.ResetTimer()
	for round := range rounds {
		// Each round starts with the next store, so that none always
		// follows the same one (the logged table's WAL and checkpoints
		// spill into whichever runs next).
		for i := range stores {
			store := stores[(round+i)%len(stores)]
			before, ok0 := cpuOf(parts)
			elapsed[store] += refreshRound(b, issuers[store], chains[store], n)
			after, ok1 := cpuOf(parts)
			for part := range parts {
				cpu[store+"-"+part] += after[part] - before[part]
			}
			cpuKnown = cpuKnown && ok0 && ok1
		}
	}
	b.StopTimer()
	rates := map[string]float64{}
	for _, store := range stores {
		rates[store] = float64(n*rounds) / elapsed[store].Seconds()
		b.ReportMetric(rates[store], store+"-refresh/s")
		for part := range parts {
			if cpuKnown {
				b.ReportMetric(float64(cpu[store+"-"+part].Microseconds())/float64(n*rounds), store+"-"+part+"-CPU-µs/refresh")
			}
		}
	}
	b.ReportMetric(rates["redis"]/rates["database"], "redis/database")
	b.ReportMetric(rates["redis"]/rates["logged"], "redis/logged")
	b.ReportMetric(rates["database"]/rates["logged"], "database/logged")
	b.ReportMetric(rates["memory"]/rates["database"], "memory/database")
}

// cpuOf is the CPU time spent so far by each part's local processes, those
// whose command name starts with the part's name (and by the exited
// children they reaped), from /proc; false if a part has none. It counts
// whatever else they are doing: a figure only from a quiet machine.
func cpuOf(parts map[string]string) (map[string]time.Duration, bool) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, false
	}
	ticks := map[string]int64{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, close := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || close < open {
			continue
		}
		// After the command: state, then fields 4 on; utime, stime,
		// cutime and cstime are fields 14 to 17.
		f := strings.Fields(string(raw[close+1:]))
		if len(f) < 15 {
			continue
		}
		var spent int64
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			spent += n
		}
		for part, name := range parts {
			if strings.HasPrefix(string(raw[open+1:close]), name) {
				ticks[part] += spent
			}
		}
	}
	// Linux reports these in USER_HZ, 100 on every supported platform.
	cpu := make(map[string]time.Duration, len(ticks))
	for part, t := range ticks {
		cpu[part] = time.Duration(t) * 10 * time.Millisecond
	}
	return cpu, len(cpu) == len(parts)
}

// refreshChains logs in 4 users per CPU on is and returns their refresh
// tokens, one chain per client.
func refreshChains(b *testing.B, is *issuer) []string {
	chains := make([]string, 4*runtime.GOMAXPROCS(0))
	for i := range chains {
		email := uniqueEmail()
		register(b, is, email)
		r := do(b, "POST", is.base+"/v1/login", map[string]string{"email": email, "password": strongPassword, "device_id": "bench"})
		wantStatus(b, "login", r, http.StatusOK)
		chains[i] = r.json(b)["refresh_token"].(string)
	}
	return chains
}

// refreshRound runs n refreshes on is, one client per chain, each client
// carrying its chain on (chains holds the latest tokens afterwards), and
// returns how long they took.
func refreshRound(b *testing.B, is *issuer, chains []string, n int) time.Duration {
	c := &http.Client{Transport: &http.Transport{MaxIdleConns: len(chains), MaxIdleConnsPerHost: len(chains)}}
	defer c.CloseIdleConnections()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range chains {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				res, err := c.Post(is.base+"/v1/refresh", "application/json", strings.NewReader(`{"refresh_token":"`+chains[i]+`"}`))
				if err != nil {
					b.Error(err)
					return
				}
				var body struct {
					RefreshToken string `json:"refresh_token"`
				}
				err = json.NewDecoder(res.Body).Decode(&body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || err != nil {
					b.Errorf("refresh = %d (%v)", res.StatusCode, err)
					return
				}
				chains[i] = body.RefreshToken
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// TestIssuerRefusesAMalformedRedisURL: what only the Redis client checks
// in --rate-limit-store (here a database number that is no number) stops
// the issuer before it opens anything, naming the flag and never the
// password; the flags' own check sees only the URL's shape, since the
// verifier shares it and links no Redis client.
func TestIssuerRefusesAMalformedRedisURL(t *testing.T) {
	for _, raw := range []string{
		"redis://u:s3cret@127.0.0.1:6379/x",
		// go-redis panicked on this when the client was made, after the
		// database was opened and migrated.
		"redis://u:s3cret@127.0.0.1:6379/0?pool_size=-3",
		"redis://u:s3cret@127.0.0.1:6379/0?pipeline_pool_size=100000000000",
	} {
		t.Run(raw, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			db := filepath.Join(t.TempDir(), "issuer.db")
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "issuer"), "serve",
				"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
				"--database-url", "sqlite:"+db, "--kek-file", kekFile(t),
				"--rate-limit-store", raw)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || ctx.Err() != nil {
				t.Fatalf("issuer serve = %v, want it to exit with an error\n%s", err, out)
			}
			if !strings.Contains(string(out), "--rate-limit-store") || strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "panic") {
				t.Errorf("issuer serve said %q, want an error naming --rate-limit-store without the password", out)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the issuer opened its database before refusing its flags: stat = %v", err)
			}
		})
	}
}
