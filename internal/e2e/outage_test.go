package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// cutter is a TCP forwarder the test puts between the issuer and
// PostgreSQL: cut closes its listener and every forwarded connection, so
// the database is gone as far as the issuer can tell (new connections are
// refused); restore listens on the same address again. blackhole closes
// every forwarded connection too but goes on accepting new ones, only to
// read from them and never answer, as a host that drops packets or hangs
// does; unhole forwards again.
type cutter struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]bool
	hole  bool
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	go c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) serve(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		hole := c.hole
		if hole {
			c.conns[client] = true
		}
		c.mu.Unlock()
		if hole {
			go io.Copy(io.Discard, client) // until blackhole or unhole closes it
			continue
		}
		server, err := net.Dial("tcp", c.target)
		if err != nil {
			client.Close()
			continue
		}
		c.mu.Lock()
		if c.ln != ln { // cut while this one was being accepted
			c.mu.Unlock()
			client.Close()
			server.Close()
			continue
		}
		c.conns[client], c.conns[server] = true, true
		c.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			c.mu.Lock()
			delete(c.conns, dst)
			delete(c.conns, src)
			c.mu.Unlock()
		}
		go pipe(client, server)
		go pipe(server, client)
	}
}

// cut drops the listener and every connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for conn := range c.conns {
		conn.Close()
		delete(c.conns, conn)
	}
}

// blackhole closes every connection and answers no new one.
func (c *cutter) blackhole() { c.setHole(true) }

// unhole closes the connections the blackhole holds and forwards again.
func (c *cutter) unhole() { c.setHole(false) }

func (c *cutter) setHole(hole bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hole = hole
	for conn := range c.conns {
		conn.Close()
		delete(c.conns, conn)
	}
}

// restore listens on the same address again.
func (c *cutter) restore(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", c.addr)
		if err == nil {
			c.mu.Lock()
			c.ln = ln
			c.mu.Unlock()
			go c.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen again on %s: %v", c.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outcome is one answer the load got.
type outcome struct {
	op             string // "refresh" or "login"
	worker         int
	started, ended time.Time
	status         int
	code           string
	contentType    string
	retryAfter     string
	err            error
}

func (o outcome) String() string {
	return fmt.Sprintf("%s by worker %d: %d %q (Content-Type %q, Retry-After %q, err %v)", o.op, o.worker, o.status, o.code, o.contentType, o.retryAfter, o.err)
}

// post sends a JSON body without failing the test, for the load's
// goroutines; it returns the outcome and the decoded body.
func post(url string, body any) (outcome, map[string]any) {
	raw, _ := json.Marshal(body)
	o := outcome{started: time.Now()}
	res, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		o.err, o.ended = err, time.Now()
		return o, nil
	}
	defer res.Body.Close()
	var m map[string]any
	o.err = json.NewDecoder(res.Body).Decode(&m)
	o.ended = time.Now()
	o.status, o.contentType, o.retryAfter = res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After")
	o.code, _ = m["code"].(string)
	return o, m
}

// TestDatabaseOutageIsUnavailable runs logins and refreshes against an
// issuer whose PostgreSQL connection the test cuts for a few seconds:
// every answer is a success or 503 unavailable with Retry-After, never a
// 500; every answer during the cut is 503; afterwards refresh works again,
// and nothing committed before or during the load is lost.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	// With the rate-limit counters in memory, only the flows meet the cut.
	t.Run("limits in memory", func(t *testing.T) { databaseOutage(t, "memory", "unavailable") })
	// With them in the database, the default on PostgreSQL, a limited
	// route's limiter meets it first and answers for it.
	t.Run("limits in the database", func(t *testing.T) {
		databaseOutage(t, "database", "unavailable", "rate_limit_unavailable")
	})
}

// databaseOutage is the outage test with --rate-limit-store limitStore;
// a 503 must carry one of codes.
func databaseOutage(t *testing.T, limitStore string, codes ...string) {
	direct := testdb.Postgres(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutter(t, u.Host)
	u.Host = px.addr
	// The reuse leeway is what a client retrying after a 503 relies on: a
	// rotation may have committed although its answer was lost in the cut.
	is := startIssuer(t, u.String(), "--rate-limit-store", limitStore, "--refresh-reuse-leeway", "5m")

	const workers = 4
	emails := make([]string, workers)
	tokens := make([]string, workers) // each worker's latest refresh token
	for i := range emails {
		emails[i] = uniqueEmail()
		register(t, is, emails[i])
		tokens[i] = login(t, is, emails[i], strongPassword, "device").Refresh
	}

	// A user for the other routes, and an admin, probed during the cut.
	probeEmail, adminEmail := uniqueEmail(), uniqueEmail()
	register(t, is, probeEmail)
	probe := login(t, is, probeEmail, strongPassword, "probe")
	if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", adminEmail, "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create --role admin: %v\n%s", err, out)
	}
	admin := login(t, is, adminEmail, strongPassword, "admin")

	var (
		mu       sync.Mutex
		outcomes []outcome
	)
	record := func(o outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	// count returns how many outcomes of op started after since and match.
	count := func(op string, since time.Time, match func(outcome) bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outcomes {
			if o.op == op && o.started.After(since) && match(o) {
				n++
			}
		}
		return n
	}
	ok := func(o outcome) bool { return o.status == http.StatusOK }
	// waitUntil polls cond until it holds, failing the test after 60 s.
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: gave up after 60s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	workerOK := func(since time.Time) func() bool {
		return func() bool {
			for w := 0; w < workers; w++ {
				if count("refresh", since, func(o outcome) bool { return o.worker == w && ok(o) }) == 0 {
					return false
				}
			}
			return count("login", since, ok) > 0
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				rt := tokens[w]
				mu.Unlock()
				o, m := post(is.base+"/v1/refresh", map[string]string{"refresh_token": rt})
				o.op, o.worker = "refresh", w
				if next, _ := m["refresh_token"].(string); o.status == http.StatusOK && next != "" {
					mu.Lock()
					tokens[w] = next
					mu.Unlock()
				}
				// Otherwise keep the token and retry it, as a client would.
				record(o)
				time.Sleep(20 * time.Millisecond) // a bounded load, not a flood
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			o, _ := post(is.base+"/v1/login", map[string]string{"email": emails[0], "password": strongPassword, "device_id": "login-loop"})
			o.op = "login"
			record(o)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() {
		stop()
		wg.Wait()
	}()

	start := time.Now()
	waitUntil("refreshes and logins to succeed before the cut", workerOK(start))

	px.cut()
	cutAt := time.Now()
	// The cut lasts until the load has met it on both routes, and at least
	// a few seconds, as a database restart would.
	each := func(outcome) bool { return true }
	waitUntil("refreshes and logins to meet the cut", func() bool {
		return time.Since(cutAt) > 3*time.Second && count("refresh", cutAt, each) >= 2*workers && count("login", cutAt, each) >= 2
	})
	// A register with an Idempotency-Key meets the cut before it reserves
	// the key; its retry after the restore registers (below).
	idemKey := "outage-" + uniqueEmail()
	idemBody := map[string]string{"email": uniqueEmail(), "password": strongPassword}
	// Every other route that needs the database says the same.
	for _, p := range []struct {
		name, method, path string
		body               any
		headers            []string
	}{
		{"register", "POST", "/v1/register", map[string]string{"email": uniqueEmail(), "password": strongPassword}, nil},
		{"register with Idempotency-Key", "POST", "/v1/register", idemBody, []string{"Idempotency-Key", idemKey}},
		{"me", "GET", "/v1/me", nil, bearer(probe.Access)},
		{"sessions", "GET", "/v1/sessions", nil, bearer(probe.Access)},
		{"revoke session", "DELETE", "/v1/sessions/" + probe.SessionID, nil, bearer(probe.Access)},
		{"logout", "POST", "/v1/logout", map[string]string{"refresh_token": probe.Refresh}, nil},
		{"logout everywhere", "POST", "/v1/logout/all", nil, bearer(probe.Access)},
		{"admin users", "GET", "/v1/admin/users", nil, bearer(admin.Access)},
	} {
		r := do(t, p.method, is.base+p.path, p.body, p.headers...)
		var code string
		if r.header.Get("Content-Type") == "application/problem+json" {
			code, _ = r.json(t)["code"].(string)
		}
		if r.status != http.StatusServiceUnavailable || !slices.Contains(codes, code) || r.header.Get("Retry-After") == "" {
			t.Errorf("%s during the cut = %d %s (Retry-After %q), want 503 problem+json with code %s and Retry-After",
				p.name, r.status, r.body, r.header.Get("Retry-After"), strings.Join(codes, " or "))
		}
	}
	// The key set needs no database once loaded: verifiers keep working.
	if r := do(t, "GET", is.base+"/.well-known/jwks.json", nil); r.status != http.StatusOK {
		t.Errorf("jwks during the cut = %d %s, want 200 (the keys already loaded)", r.status, r.body)
	}
	// /health says so in its own documented form.
	if r := do(t, "GET", is.base+"/health", nil); r.status != http.StatusServiceUnavailable || r.json(t)["status"] != "unavailable" {
		t.Errorf("health during the cut = %d %s, want 503 {\"status\":\"unavailable\"}", r.status, r.body)
	}
	restoreAt := time.Now()
	px.restore(t)

	waitUntil("every worker's refresh and a login to succeed after the cut", workerOK(restoreAt))
	stop()
	wg.Wait()

	// The client retrying its register with the same key and body gets the
	// registration, not idempotency_key_in_progress, and then its replay.
	first := do(t, "POST", is.base+"/v1/register", idemBody, "Idempotency-Key", idemKey)
	wantStatus(t, "register with the Idempotency-Key of the cut, after the restore", first, http.StatusCreated)
	replay := do(t, "POST", is.base+"/v1/register", idemBody, "Idempotency-Key", idemKey)
	if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, first.body) {
		t.Errorf("register with the same key again = %d %s (Idempotent-Replayed %q), want the replay of 201 %s",
			replay.status, replay.body, replay.header.Get("Idempotent-Replayed"), first.body)
	}

	mu.Lock()
	all := append([]outcome(nil), outcomes...)
	mu.Unlock()
	var during, after503 int
	bad := map[string][]outcome{} // what is wrong -> the outcomes, to report a few of each
	for _, o := range all {
		switch {
		case o.err != nil:
			bad["the request failed"] = append(bad["the request failed"], o)
		case o.status == http.StatusServiceUnavailable:
			if !slices.Contains(codes, o.code) || o.retryAfter == "" || o.contentType != "application/problem+json" {
				bad["want 503 problem+json with Retry-After and code "+strings.Join(codes, " or ")] = append(bad["want 503 problem+json with Retry-After and code "+strings.Join(codes, " or ")], o)
			}
			if o.started.After(restoreAt) {
				after503++
			}
		case o.status != http.StatusOK:
			bad["want 200 or 503 unavailable"] = append(bad["want 200 or 503 unavailable"], o)
		}
		if o.started.After(cutAt) && o.ended.Before(restoreAt) {
			during++
			if o.status != http.StatusServiceUnavailable {
				bad["during the cut, want 503 unavailable"] = append(bad["during the cut, want 503 unavailable"], o)
			}
		}
	}
	for what, list := range bad {
		t.Errorf("%d of %d answers: %s; the first: %v", len(list), len(all), what, list[0])
	}
	if during == 0 {
		t.Fatal("no request ran entirely during the cut; the test proved nothing")
	}
	t.Logf("%d answers, %d during the cut, %d answered 503 after the restore", len(all), during, after503)

	// Nothing committed is lost: every account is there and takes its
	// password, and every worker's latest refresh token, from its last
	// success, rotates.
	if r := do(t, "GET", is.base+"/v1/me", nil, bearer(probe.Access)...); r.status != http.StatusOK {
		t.Errorf("me after the outage = %d %s, want 200", r.status, r.body)
	}
	st := openStore(t, direct)
	for i, email := range emails {
		if _, err := st.UserByEmail(context.Background(), email); err != nil {
			t.Errorf("UserByEmail(%s) after the outage: %v", email, err)
		}
		login(t, is, email, strongPassword, "after")
		r := refresh(t, is, tokens[i])
		if r.status != http.StatusOK {
			t.Errorf("worker %d: refresh with the token of its last success = %d %s, want 200", i, r.status, r.body)
		}
	}
}

// TestAbandonedIdempotencyKeyIsTakenOver: a register that reserved its
// Idempotency-Key and could neither complete nor release it (the database
// went away between the two, or the process died) leaves the reservation
// unfinished. Within the lease the key is still in progress; after it, the
// client's retry with the same key and body registers.
func TestAbandonedIdempotencyKeyIsTakenOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		st := openStore(t, dbURL)
		// The reservations the requests left, made as the issuer makes them.
		abandon := func(key string, body []byte, age time.Duration) {
			t.Helper()
			fp := idempotency.Fingerprint([]byte("POST"), []byte("/v1/register"), body)
			rec := store.IdempotencyRecord{Scope: "register", Key: key, RequestHash: fp, CreatedAt: time.Now().Add(-age).UTC().Truncate(time.Microsecond)}
			if _, err := st.ReserveIdempotencyKey(context.Background(), rec, time.Now().Add(-idempotency.Retention)); err != nil {
				t.Fatalf("ReserveIdempotencyKey(%s): %v", key, err)
			}
		}
		body := func() []byte {
			raw, err := json.Marshal(map[string]string{"email": uniqueEmail(), "password": strongPassword})
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		running, runningBody := "running-"+uniqueEmail(), body()
		abandoned, abandonedBody := "abandoned-"+uniqueEmail(), body()
		abandon(running, runningBody, 0)
		abandon(abandoned, abandonedBody, 2*idempotency.Lease)

		wantProblem(t, "register with a key reserved just now", do(t, "POST", is.base+"/v1/register", runningBody, "Idempotency-Key", running),
			http.StatusConflict, "idempotency_key_in_progress")
		wantProblem(t, "register with an abandoned key and another body", do(t, "POST", is.base+"/v1/register", body(), "Idempotency-Key", abandoned),
			http.StatusUnprocessableEntity, "idempotency_key_reused")
		first := do(t, "POST", is.base+"/v1/register", abandonedBody, "Idempotency-Key", abandoned)
		wantStatus(t, "register with an abandoned key and its body", first, http.StatusCreated)
		replay := do(t, "POST", is.base+"/v1/register", abandonedBody, "Idempotency-Key", abandoned)
		if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, first.body) {
			t.Errorf("register with the taken-over key again = %d %s (Idempotent-Replayed %q), want the replay of 201 %s",
				replay.status, replay.body, replay.header.Get("Idempotent-Replayed"), first.body)
		}
	})
}

// TestUnreachableDatabaseIsUnavailable puts the issuer's PostgreSQL behind
// a host that accepts connections and never answers: requests that need
// the database are answered 503 unavailable (the connect timeout ends the
// wait) instead of hanging until the client gives up; after it answers
// again, requests work again.
func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	direct := testdb.Postgres(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutter(t, u.Host)
	u.Host = px.addr
	is := startIssuer(t, u.String(), "--rate-limit-store", "memory")
	email := uniqueEmail()
	register(t, is, email)
	tok := login(t, is, email, strongPassword, "device")

	px.blackhole()
	for _, p := range []struct {
		name, method, path string
		body               any
		headers            []string
	}{
		{"login", "POST", "/v1/login", map[string]string{"email": email, "password": strongPassword}, nil},
		{"me", "GET", "/v1/me", nil, bearer(tok.Access)},
		{"register with Idempotency-Key", "POST", "/v1/register", map[string]string{"email": uniqueEmail(), "password": strongPassword},
			[]string{"Idempotency-Key", "blackhole-" + email}},
	} {
		// The client's own timeout (30 s) is what fails this without a
		// connect timeout.
		r := do(t, p.method, is.base+p.path, p.body, p.headers...)
		var code string
		if r.header.Get("Content-Type") == "application/problem+json" {
			code, _ = r.json(t)["code"].(string)
		}
		if r.status != http.StatusServiceUnavailable || code != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s while the database does not answer = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				p.name, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	px.unhole()
	// The pool may still hold a connection the blackhole closed: a client
	// retries after a 503, and so does this one, until it gets through.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := do(t, "GET", is.base+"/v1/me", nil, bearer(tok.Access)...)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("me after the database answers again = %d %s, want 200 (after 503s at most)", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
