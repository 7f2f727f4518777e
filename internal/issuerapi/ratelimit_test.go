package issuerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clientip"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/redisstore"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestEveryAnonymousWriteIsLimited: a route anyone may send a body to
// (an unauthenticated POST) has rate limits, or says why it has none, so a
// new route cannot go unlimited by omission.
func TestEveryAnonymousWriteIsLimited(t *testing.T) {
	for _, rt := range (&API{}).routes() {
		anonymousWrite := !rt.protected && strings.HasPrefix(rt.pattern, "POST ")
		switch {
		case anonymousWrite && len(rt.limits) == 0 && rt.unlimited == "":
			t.Errorf("route %s: no rate limit and no reason in unlimited", rt.pattern)
		case len(rt.limits) > 0 && rt.unlimited != "":
			t.Errorf("route %s: has limits and says it is unlimited (%q)", rt.pattern, rt.unlimited)
		}
	}
}

// TestRouteLimitsAreWellFormed checks what the route table can get wrong:
// an unknown limit name, a per-user limit before authentication, a rule
// kind on a subject it cannot work with.
func TestRouteLimitsAreWellFormed(t *testing.T) {
	defaults := ratelimit.Defaults()
	for _, rt := range (&API{}).routes() {
		for _, rule := range rt.limits {
			if _, ok := defaults[rule.name]; !ok {
				t.Errorf("route %s: unknown limit %q", rt.pattern, rule.name)
			}
			if rule.per == perUser && !rt.protected {
				t.Errorf("route %s: limit %s per user, but the route is not authenticated", rt.pattern, rule.name)
			}
			if rule.over == refuseUnlessKnown && rule.per != perEmail {
				t.Errorf("route %s: limit %s passes known clients but is not per email", rt.pattern, rule.name)
			}
			// Only forgot-password's handler honours throttled.
			if rule.over == quiet && rt.pattern != "POST /v1/password/forgot" {
				t.Errorf("route %s: quiet limit %s, but its handler does not check throttled", rt.pattern, rule.name)
			}
		}
		// Per-user limits are split off to run after authentication;
		// splitLimits panics for an unprotected route.
		before, after := splitLimits(rt)
		if len(before)+len(after) != len(rt.limits) {
			t.Errorf("route %s: splitLimits lost rules", rt.pattern)
		}
	}
}

// TestEveryLimitIsUsed: every limit --rate-limit can set is in front of a
// route.
func TestEveryLimitIsUsed(t *testing.T) {
	used := map[string]bool{}
	for _, rt := range (&API{}).routes() {
		for _, rule := range rt.limits {
			used[rule.name] = true
		}
	}
	for _, name := range ratelimit.Names() {
		if !used[name] {
			t.Errorf("limit %s is configurable but no route uses it", name)
		}
	}
}

// TestOpenAPIDocumentsRateLimits: a route that can answer 429 documents
// it.
func TestOpenAPIDocumentsRateLimits(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(readOpenAPI(t), &doc); err != nil {
		t.Fatalf("decode %s: %v", openAPIPath, err)
	}
	for _, rt := range (&API{}).routes() {
		refuses := false
		for _, rule := range rt.limits {
			refuses = refuses || rule.over != quiet
		}
		if !refuses {
			continue
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)].Responses["429"]; !ok {
			t.Errorf("%s: %s answers 429 when rate limited but does not document it", openAPIPath, rt.pattern)
		}
	}
}

// peekFails is a counter store whose mark reads fail while its takes work.
type peekFails struct{ *ratelimit.Memory }

func (peekFails) Marked(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}

// limitedAPI returns an API whose limiter keeps its counters in st, at a
// fixed time, trusting 192.0.2.1 (httptest's peer) as a proxy.
func limitedAPI(t *testing.T, st ratelimit.Store, overrides ...string) *API {
	t.Helper()
	return loggedLimitedAPI(t, st, io.Discard, overrides...)
}

// loggedLimitedAPI is limitedAPI logging to out, as JSON lines.
func loggedLimitedAPI(t *testing.T, st ratelimit.Store, out io.Writer, overrides ...string) *API {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(out, nil))
	now := time.Unix(1_900_000_000, 0)
	l, err := ratelimit.New(st, overrides, func() time.Time { return now }, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ips, err := clientip.New([]string{"192.0.2.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	return New(Deps{Limiter: l, ClientIP: ips, Logger: log}, Config{})
}

// routeLimits returns the limits the route table puts in front of pattern.
func routeLimits(t *testing.T, pattern string) []rateRule {
	t.Helper()
	for _, rt := range (&API{}).routes() {
		if rt.pattern == pattern {
			return rt.limits
		}
	}
	t.Fatalf("no route %s", pattern)
	return nil
}

// post sends body to h as if from client, and returns the answer and
// whether h ran (and if so whether it saw the request as throttled).
func post(h func(http.Handler) http.Handler, client, body string) (w *httptest.ResponseRecorder, ran, wasThrottled bool) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Forwarded-For", client)
	w = httptest.NewRecorder()
	h(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran, wasThrottled = true, throttled(r)
		w.WriteHeader(http.StatusOK)
	})).ServeHTTP(w, r)
	return w, ran, wasThrottled
}

func TestLoginCeilingPassesKnownClients(t *testing.T) {
	a := limitedAPI(t, ratelimit.NewMemory(), "login=1000/1m", "login_email_client=2/1h", "login_email=3/1h")
	rules := routeLimits(t, "POST /v1/login")
	h := func(next http.Handler) http.Handler { return a.limit(rules, next) }
	const body = `{"email":"Owner@Example.com","password":"x"}`
	// The owner's address logged in once.
	home := httptest.NewRequest("POST", "/", nil)
	home.Header.Set("X-Forwarded-For", "203.0.113.1")
	a.loggedIn(home, "owner@example.com")

	for i, c := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.2"} {
		if w, ran, _ := post(h, c, body); !ran {
			t.Fatalf("guess %d from %s = %d, want it through", i+1, c, w.Code)
		}
	}
	if w, ran, _ := post(h, "198.51.100.1", body); ran || w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Limit") != "2" {
		t.Errorf("third guess from one address = %d (limit %q), want 429 from the pair limit of 2", w.Code, w.Header().Get("X-RateLimit-Limit"))
	}
	if w, ran, _ := post(h, "198.51.100.3", body); ran || w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Limit") != "3" {
		t.Errorf("guess from a new address, ceiling spent = %d (limit %q), want 429 from the ceiling of 3", w.Code, w.Header().Get("X-RateLimit-Limit"))
	}
	w, ran, _ := post(h, "203.0.113.1", body)
	if !ran {
		t.Fatalf("the owner's remembered address, ceiling spent = %d, want it through", w.Code)
	}
	// The ceiling it passed is not what its headers show: its pair is.
	if got := w.Header().Get("X-RateLimit-Limit"); got != "2" {
		t.Errorf("X-RateLimit-Limit for the remembered address = %q, want 2 (its pair)", got)
	}
	// Other emails are untouched by all this.
	if w, ran, _ := post(h, "198.51.100.3", `{"email":"other@example.com"}`); !ran {
		t.Errorf("another email from a new address = %d, want it through", w.Code)
	}
	// A completed reset from a new address clears the ceiling and lets
	// that address in.
	phone := httptest.NewRequest("POST", "/", nil)
	phone.Header.Set("X-Forwarded-For", "203.0.113.2")
	a.passwordReset(phone, "OWNER@example.com")
	for i := 0; i < 2; i++ {
		if w, ran, _ := post(h, "203.0.113.2", body); !ran {
			t.Errorf("login %d from the resetting address = %d, want it through", i+1, w.Code)
		}
	}
	if w, ran, _ := post(h, "198.51.100.4", body); !ran {
		t.Errorf("a new address after the reset = %d, want it through (the ceiling started over)", w.Code)
	}
}

// When the ceiling is spent and the remembered addresses cannot be read,
// login fails closed: 503, not a guess let through.
func TestLoginCeilingFailsClosed(t *testing.T) {
	a := limitedAPI(t, peekFails{ratelimit.NewMemory()}, "login_email=1/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/login"), next) }
	const body = `{"email":"owner@example.com","password":"x"}`
	post(h, "198.51.100.1", body)
	w, ran, _ := post(h, "198.51.100.2", body)
	if ran || w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "rate_limit_unavailable") {
		t.Errorf("ceiling spent, marks unreadable = %d %s, want 503 rate_limit_unavailable", w.Code, w.Body)
	}
}

func TestForgotCapIsQuiet(t *testing.T) {
	a := limitedAPI(t, ratelimit.NewMemory(), "password_forgot=1000/1m", "password_forgot_email=1/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }
	for _, tc := range []struct {
		name, body    string
		wantThrottled bool
	}{
		{"first", `{"email":"a@example.com"}`, false},
		{"second, spelled otherwise", `{"email":" A@EXAMPLE.COM "}`, true},
		{"another email", `{"email":"b@example.com"}`, false},
		{"no email", `{}`, false},
		{"not JSON", `{`, false},
	} {
		w, ran, got := post(h, "198.51.100.1", tc.body)
		if !ran || got != tc.wantThrottled {
			t.Errorf("%s: ran %v, throttled %v (status %d), want ran, throttled %v", tc.name, ran, got, w.Code, tc.wantThrottled)
		}
		// The headers are the per-address limit's, whatever the cap says.
		if got := w.Header().Get("X-RateLimit-Limit"); got != "1000" {
			t.Errorf("%s: X-RateLimit-Limit = %q, want 1000 (the per-address limit)", tc.name, got)
		}
	}
}

// A client that hangs up once its body is sent passes no limit, the
// fail-open ones included: its check ends with its request, which runs
// nothing and answers 499 (no 5xx, no store failure). Before, the store's
// context error took the fail-open path, and a forgot-password request
// went through uncounted by the mailbox's cap.
func TestHungUpClientIsNotLetThrough(t *testing.T) {
	a := limitedAPI(t, ratelimit.NewGCRA(testdb.Store(t, testdb.SQLite(t))), "password_forgot=1000/1m", "password_forgot_email=1/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }
	const body = `{"email":"owner@example.com"}`
	if w, ran, throttled := post(h, "198.51.100.1", body); !ran || throttled {
		t.Fatalf("first request = %d, ran %v, throttled %v; want it through, unthrottled", w.Code, ran, throttled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Forwarded-For", "198.51.100.2")
	w := httptest.NewRecorder()
	ran := false
	h(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(w, r)
	if ran || w.Code != httpserver.StatusClientClosedRequest {
		t.Errorf("request whose client hung up = %d, ran %v; want 499, not run", w.Code, ran)
	}
}

// A request waits on a Redis that never answers once: after its first
// call times out, forgot-password's second fail-open limit, and what its
// handler asks after them, fail at once. Before, each call waited the
// whole timeout, and forgot-password took twice the timeout.
func TestRequestWaitsOnTheStoreOnce(t *testing.T) {
	st, err := redisstore.Open(testdb.HangingRedis(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	a := loggedLimitedAPI(t, st, &logs)
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{"email":"owner@example.com"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	ran := false
	h(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		a.loggedIn(r, "owner@example.com")
	})).ServeHTTP(w, r)
	if !ran {
		t.Fatalf("forgot-password with a silent Redis = %d, want it through (its limits fail open)", w.Code)
	}
	var errs []string
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Msg, Err string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Err != "" {
			errs = append(errs, rec.Msg+": "+rec.Err)
		}
	}
	want := []string{context.DeadlineExceeded.Error(), ratelimit.ErrStoreFailedBefore.Error(), ratelimit.ErrStoreFailedBefore.Error()}
	if len(errs) != len(want) {
		t.Fatalf("logged errors = %q, want %d: the timeout, then two calls not made", errs, len(want))
	}
	for i, e := range errs {
		if !strings.Contains(e, want[i]) {
			t.Errorf("logged error %d = %q, want it to say %q", i+1, e, want[i])
		}
	}
}

// A burst of requests whose store calls all time out (Redis silent, or
// its connections still being opened) passes a fail-open limit no more
// than the limit allows: each replica counts them itself. Before, all 20
// ran, and a probe put 100 reset mails into one account's outbox with
// 100 concurrent requests after a Redis restart.
func TestSilentStoreBurstPassesOnlyTheLimit(t *testing.T) {
	st, err := redisstore.Open(testdb.HangingRedis(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := limitedAPI(t, st, "password_forgot=5/15m", "password_forgot_email=1000/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }
	const burst = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ran    int
		status = map[int]int{}
	)
	for range burst {
		wg.Go(func() {
			w, did, _ := post(h, "198.51.100.1", `{"email":"owner@example.com"}`)
			mu.Lock()
			defer mu.Unlock()
			status[w.Code]++
			if did {
				ran++
			}
		})
	}
	wg.Wait()
	if ran != 5 || status[http.StatusOK] != 5 || status[http.StatusTooManyRequests] != burst-5 {
		t.Errorf("%d concurrent forgot-password requests from one address with Redis silent: %d ran, statuses %v; want 5 run (the limit), the rest 429", burst, ran, status)
	}
}

// A locked rate_limits table costs a request the database store's
// timeout, not as long as the lock is held: then each limit's policy
// applies (forgot-password's fail open, counted by the issuer itself).
// Before, a take waited out a 40 s lock, and 60 such requests held every
// connection of the pool.
func TestLockedCounterTableCostsATimeout(t *testing.T) {
	dbURL := testdb.Postgres(t)
	st := ratelimit.Bounded(ratelimit.NewGCRA(testdb.Store(t, dbURL)), 300*time.Millisecond)
	a := limitedAPI(t, st, "password_forgot=2/15m", "password_forgot_email=1000/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }

	testdb.LockTable(t, dbURL, "rate_limits")
	// The lock outlasts the requests: only the timeout can end a take.
	// (10 s is a failure ceiling: without the timeout a take waits until
	// the lock is released, by the deferred rollback.)
	ran := 0
	for i := range 3 {
		type answer struct {
			w   *httptest.ResponseRecorder
			did bool
		}
		done := make(chan answer, 1)
		go func() {
			w, did, _ := post(h, "198.51.100.1", `{"email":"owner@example.com"}`)
			done <- answer{w, did}
		}()
		var got answer
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("forgot-password #%d waited 10 s on the locked counters", i+1)
		}
		w, did := got.w, got.did
		if did {
			ran++
		}
		if want := i < 2; did != want {
			t.Errorf("forgot-password #%d with the counters locked = %d, ran %v; want ran %v (counted by the issuer, limit 2)", i+1, w.Code, did, want)
		}
	}
	if ran != 2 {
		t.Errorf("%d of 3 ran, want 2", ran)
	}
}

// Per-client limits count an IPv6 client by its /64: any address in it
// spends the same quota, and the login pair and remembered addresses are
// kept by it too. By address, one /64 was 2^64 clients, each with a whole
// quota.
func TestIPv6ClientsCountByPrefix(t *testing.T) {
	a := limitedAPI(t, ratelimit.NewMemory(), "password_forgot=2/15m", "password_forgot_email=1000/1h")
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/password/forgot"), next) }
	for i, client := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::3"} {
		_, ran, _ := post(h, client, `{"email":"owner@example.com"}`)
		if want := i < 2; ran != want {
			t.Errorf("request %d, from %s: ran %v, want %v (the /64's limit of 2)", i+1, client, ran, want)
		}
	}
	if _, ran, _ := post(h, "2001:db8:1:3::1", `{"email":"owner@example.com"}`); !ran {
		t.Errorf("a request from the next /64 did not run: it has its own quota")
	}
	// Remembered after a login from one address, a client passes the
	// email's ceiling from another address of its /64.
	login := routeLimits(t, "POST /v1/login")
	b := limitedAPI(t, ratelimit.NewMemory(), "login=1000/1m", "login_email_client=1000/1h", "login_email=1/1h")
	lh := func(next http.Handler) http.Handler { return b.limit(login, next) }
	body := `{"email":"owner@example.com","password":"x"}`
	if _, ran, _ := post(lh, "2001:db8:5:5::1", body); !ran {
		t.Fatal("the first login did not run")
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Forwarded-For", "2001:db8:5:5::1")
	b.loggedIn(r, "owner@example.com")
	if _, ran, _ := post(lh, "2001:db8:5:5::99", body); !ran {
		t.Errorf("a login from another address of the remembered /64, over the ceiling: not run; want it through")
	}
	if _, ran, _ := post(lh, "2001:db8:6:6::1", body); ran {
		t.Errorf("a login from another /64, over the ceiling: ran; want it refused")
	}
}

// A healthy Redis far away costs each call its round trip, however many
// calls a request makes: logins whose four calls (three checks, then the
// address remembered) take longer together than the timeout, each well
// within it, all pass. One allowance of the timeout per request, tried
// before, answered them 503.
func TestDistantRedisIsNotAnOutage(t *testing.T) {
	// Four calls of 300 ms outlast the 1 s timeout together; each has
	// 700 ms to spare on a loaded machine.
	const rtt, timeout = 300 * time.Millisecond, time.Second
	u, setLatency := testdb.RedisRelay(t, nil)
	st, err := redisstore.Open(u, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := limitedAPI(t, st)
	h := func(next http.Handler) http.Handler { return a.limit(routeLimits(t, "POST /v1/login"), next) }
	login := func() int {
		r := httptest.NewRequest("POST", "/", strings.NewReader(`{"email":"owner@example.com","password":"x"}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.loggedIn(r, "owner@example.com")
			w.WriteHeader(http.StatusOK)
		})).ServeHTTP(w, r)
		return w.Code
	}
	// The connection is made while Redis is near: its handshake is not
	// what this is about (TestNewConnectionHandshakeIsHello is).
	if code := login(); code != http.StatusOK {
		t.Fatalf("login with Redis near = %d, want 200", code)
	}
	setLatency(rtt)
	for i := range 2 {
		if code := login(); code != http.StatusOK {
			t.Errorf("login %d with Redis %s away (timeout %s per call) = %d, want 200", i+1, rtt, timeout, code)
		}
	}
}

// Once a login or a reset has happened, what the limiter is told about it
// is told even if the client hangs up at that moment: the owner's address
// is remembered.
func TestHangUpAfterLoginStillRemembers(t *testing.T) {
	st := ratelimit.NewGCRA(testdb.Store(t, testdb.SQLite(t)))
	a := limitedAPI(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/", nil)
	r.Header.Set("X-Forwarded-For", "203.0.113.1")
	a.loggedIn(r, "owner@example.com")
	subj := ratelimit.LoginSubject("owner@example.com", "203.0.113.1")
	if ok, err := a.limiter.Remembered(context.Background(), ratelimit.KnownLoginClient, subj); !ok || err != nil {
		t.Errorf("address of a login whose client hung up remembered = %v, %v; want true", ok, err)
	}
	r.Header.Set("X-Forwarded-For", "203.0.113.2")
	a.passwordReset(r, "owner@example.com")
	subj = ratelimit.LoginSubject("owner@example.com", "203.0.113.2")
	if ok, err := a.limiter.Remembered(context.Background(), ratelimit.KnownLoginClient, subj); !ok || err != nil {
		t.Errorf("address of a reset whose client hung up remembered = %v, %v; want true", ok, err)
	}
}
