package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/pkg/webhook"
)

// hookWait bounds every wait for a delivery: the dispatcher polls every
// couple of seconds and retries no sooner than a second after a failure.
const hookWait = 60 * time.Second

// hookDelivery is one request the receiver got.
type hookDelivery struct {
	header http.Header
	body   []byte
	event  struct {
		ID        string         `json:"id"`
		Type      string         `json:"type"`
		CreatedAt string         `json:"created_at"`
		Data      map[string]any `json:"data"`
	}
}

// hookReceiver is a real HTTP receiver on loopback: it records every
// delivery by path and answers with the status respond gives (200 when it
// is nil), n being how many deliveries the path got before this one.
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     map[string][]hookDelivery
	changed chan struct{} // closed and replaced on every delivery
	respond map[string]func(n int) int
}

func newHookReceiver(t *testing.T, addr string) *hookReceiver {
	t.Helper()
	h := &hookReceiver{got: map[string][]hookDelivery{}, changed: make(chan struct{}), respond: map[string]func(int) int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	h.srv = srv
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := hookDelivery{header: r.Header.Clone(), body: body}
	_ = json.Unmarshal(body, &d.event)
	h.mu.Lock()
	n := len(h.got[r.URL.Path])
	h.got[r.URL.Path] = append(h.got[r.URL.Path], d)
	status := http.StatusOK
	if f := h.respond[r.URL.Path]; f != nil {
		status = f(n)
	}
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	switch {
	case status == hang:
		<-r.Context().Done() // until the sender gives up
		return
	case status >= 300 && status < 400:
		w.Header().Set("Location", "/redirected")
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "3600")
	}
	w.WriteHeader(status)
}

// hang, as a respond status, holds the request unanswered until the sender
// gives up on it.
const hang = -1

func (h *hookReceiver) setRespond(path string, f func(n int) int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.respond[path] = f
}

func (h *hookReceiver) url(path string) string { return h.srv.URL + path }

// deliveries returns what path got so far.
func (h *hookReceiver) deliveries(path string) []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got[path])
}

// waitFor waits until path has got a delivery that match accepts, and
// returns it.
func (h *hookReceiver) waitFor(t *testing.T, path, what string, match func(hookDelivery) bool) hookDelivery {
	t.Helper()
	deadline := time.NewTimer(hookWait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		for _, d := range h.got[path] {
			if match(d) {
				h.mu.Unlock()
				return d
			}
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s never got %s; it got %d deliveries", path, what, len(h.deliveries(path)))
		}
	}
}

// waitCount waits until path has got at least n deliveries and returns
// them.
func (h *hookReceiver) waitCount(t *testing.T, path string, n int) []hookDelivery {
	t.Helper()
	deadline := time.NewTimer(hookWait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		got, changed := slices.Clone(h.got[path]), h.changed
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s got %d deliveries, want %d", path, len(got), n)
		}
	}
}

// event matches a delivery of an event of typ about userID.
func event(typ, userID string) func(hookDelivery) bool {
	return func(d hookDelivery) bool { return d.event.Type == typ && d.event.Data["user_id"] == userID }
}

// webhookIssuer starts an issuer whose webhooks may reach the loopback
// receiver and retry quickly.
func webhookIssuer(t *testing.T, dbURL string, extra ...string) *issuer {
	t.Helper()
	return startIssuer(t, dbURL, append([]string{"--webhook-allow-cidr", "127.0.0.1/32", "--webhook-retry-backoff", "200ms"}, extra...)...)
}

// webhookAdmin creates an admin from the command line and logs it in.
func webhookAdmin(t *testing.T, is *issuer) string {
	t.Helper()
	email := uniqueEmail()
	if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", email, "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create --role admin: %v\n%s", err, out)
	}
	return login(t, is, email, strongPassword, "admin-laptop").Access
}

// createHook registers an endpoint and returns its id and secret.
func createHook(t *testing.T, is *issuer, admin string, body map[string]any) (id, secret string) {
	t.Helper()
	r := do(t, "POST", is.base+"/v1/admin/webhooks", body, bearer(admin)...)
	wantStatus(t, "register webhook", r, http.StatusCreated)
	m := r.json(t)
	id, _ = m["id"].(string)
	secret, _ = m["secret"].(string)
	if id == "" || secret == "" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("register webhook = %s (Cache-Control %q), want an id, a secret and no-store", r.body, r.header.Get("Cache-Control"))
	}
	return id, secret
}

// verifySeed and verifyStandard check a delivery's signature under secrets.
func verifySeed(d hookDelivery, secrets ...string) error {
	var keys [][]byte
	for _, s := range secrets {
		keys = append(keys, []byte(s))
	}
	return webhook.Verify(keys, d.header, d.body, time.Now())
}

func verifyStandard(t *testing.T, d hookDelivery, secrets ...string) error {
	t.Helper()
	var keys [][]byte
	for _, s := range secrets {
		k, err := webhook.ParseStandardSecret(s)
		if err != nil {
			t.Fatalf("ParseStandardSecret(%q): %v", s, err)
		}
		keys = append(keys, k)
	}
	return webhook.VerifyStandard(keys, d.header, d.body, time.Now())
}

// hookDeliveries lists an endpoint's deliveries through the admin API.
func hookDeliveries(t *testing.T, is *issuer, admin, endpointID, status string) []map[string]any {
	t.Helper()
	path := is.base + "/v1/admin/webhooks/" + endpointID + "/deliveries?limit=500"
	if status != "" {
		path += "&status=" + status
	}
	r := do(t, "GET", path, nil, bearer(admin)...)
	wantStatus(t, "list deliveries", r, http.StatusOK)
	var page struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// waitDelivery polls an endpoint's deliveries until one matches.
func waitDelivery(t *testing.T, is *issuer, admin, endpointID, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(hookWait)
	for {
		for _, d := range hookDeliveries(t, is, admin, endpointID, "") {
			if match(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s never had a delivery %s: %v", endpointID, what, hookDeliveries(t, is, admin, endpointID, ""))
		}
		time.Sleep(100 * time.Millisecond) // polling a black box; no timing is asserted
	}
}

// TestWebhookDelivery drives the webhooks of a real issuer against a real
// receiver: both formats verify with pkg/webhook, subscriptions filter,
// disable and delete stop deliveries, rotation signs with the old secret
// during the overlap and with the new one after it (or at once), a 500 is
// retried with the same event id, a delivery that keeps failing ends
// failed after --webhook-max-attempts, and a redelivery through the API
// arrives with the same event id.
func TestWebhookDelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		rcv := newHookReceiver(t, "")
		is := webhookIssuer(t, dbURL, "--webhook-max-attempts", "2")
		admin := webhookAdmin(t, is)

		seedID, seedSecret := createHook(t, is, admin, map[string]any{
			"url": rcv.url("/seed"), "events": []string{"user.registered", "user.logged_in"}, "description": "seed format",
		})
		stdID, stdSecret := createHook(t, is, admin, map[string]any{"url": rcv.url("/standard"), "events": []string{"*"}, "format": "standard-webhooks"})
		otherID, _ := createHook(t, is, admin, map[string]any{"url": rcv.url("/other"), "events": []string{"password.reset", "email.verified"}})
		if !strings.HasPrefix(stdSecret, "whsec_") {
			t.Errorf("standard-webhooks secret = %q, want whsec_...", stdSecret)
		}

		email := uniqueEmail()
		userID := register(t, is, email)["id"].(string)
		session := login(t, is, email, strongPassword, "phone").SessionID

		t.Run("Seed", func(t *testing.T) {
			reg := rcv.waitFor(t, "/seed", "user.registered", event("user.registered", userID))
			in := rcv.waitFor(t, "/seed", "user.logged_in", event("user.logged_in", userID))
			for _, d := range []hookDelivery{reg, in} {
				if err := verifySeed(d, seedSecret); err != nil {
					t.Errorf("%s: webhook.Verify = %v, want nil", d.event.Type, err)
				}
				if err := verifySeed(d, "another secret"); err == nil {
					t.Errorf("%s: verifies under another secret", d.event.Type)
				}
				if d.header.Get("Webhook-Id") != d.event.ID || d.header.Get("Content-Type") != "application/json" || d.header.Get("User-Agent") == "" {
					t.Errorf("%s headers = %v, want Webhook-Id = body id %s, JSON, a User-Agent", d.event.Type, d.header, d.event.ID)
				}
				if d.event.ID == "" || d.event.CreatedAt == "" {
					t.Errorf("%s body = %s, want id and created_at", d.event.Type, d.body)
				}
			}
			if in.event.Data["session_id"] != session {
				t.Errorf("user.logged_in data = %v, want session_id %s", in.event.Data, session)
			}
			for _, d := range []hookDelivery{reg, in} {
				for _, secret := range []string{strongPassword, email, seedSecret} {
					if strings.Contains(string(d.body), secret) {
						t.Errorf("%s body %s holds %q", d.event.Type, d.body, secret)
					}
				}
			}
		})
		t.Run("Standard", func(t *testing.T) {
			for _, typ := range []string{"user.registered", "user.logged_in"} {
				d := rcv.waitFor(t, "/standard", typ, event(typ, userID))
				if err := verifyStandard(t, d, stdSecret); err != nil {
					t.Errorf("%s: webhook.VerifyStandard = %v, want nil; headers %v", typ, err, d.header)
				}
			}
		})
		t.Run("Filter", func(t *testing.T) {
			// Deliveries are queued with the event, in its transaction:
			// once the others got theirs, none exists for this endpoint.
			if ds := hookDeliveries(t, is, admin, otherID, ""); len(ds) != 0 {
				t.Errorf("endpoint subscribed to other types has deliveries %v, want none", ds)
			}
			if ds := rcv.deliveries("/other"); len(ds) != 0 {
				t.Errorf("endpoint subscribed to other types received %d deliveries, want none", len(ds))
			}
			if ds := rcv.deliveries("/seed"); len(ds) != 2 {
				t.Errorf("seed endpoint received %d deliveries, want 2 (user.registered, user.logged_in)", len(ds))
			}
		})

		t.Run("Rotation", func(t *testing.T) {
			r := do(t, "POST", is.base+"/v1/admin/webhooks/"+seedID+"/secret", map[string]any{"overlap": 3600}, bearer(admin)...)
			wantStatus(t, "rotate with overlap", r, http.StatusOK)
			second, _ := r.json(t)["secret"].(string)
			u := register(t, is, uniqueEmail())["id"].(string)
			d := rcv.waitFor(t, "/seed", "a delivery during the overlap", event("user.registered", u))
			if verifySeed(d, seedSecret) != nil || verifySeed(d, second) == nil {
				t.Errorf("during the overlap: want the delivery signed with the old secret only")
			}

			// Overlap 0: the newest secret signs at once.
			r = do(t, "POST", is.base+"/v1/admin/webhooks/"+seedID+"/secret", map[string]any{"overlap": 0}, bearer(admin)...)
			wantStatus(t, "rotate without overlap", r, http.StatusOK)
			third, _ := r.json(t)["secret"].(string)
			u = register(t, is, uniqueEmail())["id"].(string)
			d = rcv.waitFor(t, "/seed", "a delivery after a rotation without overlap", event("user.registered", u))
			if verifySeed(d, third) != nil || verifySeed(d, seedSecret, second) == nil {
				t.Errorf("after a rotation without overlap: want the delivery signed with the new secret only")
			}

			// A short overlap: once it has passed, the new secret signs.
			r = do(t, "POST", is.base+"/v1/admin/webhooks/"+seedID+"/secret", map[string]any{"overlap": 1}, bearer(admin)...)
			wantStatus(t, "rotate with a short overlap", r, http.StatusOK)
			fourth, _ := r.json(t)["secret"].(string)
			<-time.After(1500 * time.Millisecond) // let the overlap end; nothing about timing is asserted
			u = register(t, is, uniqueEmail())["id"].(string)
			d = rcv.waitFor(t, "/seed", "a delivery after the overlap", event("user.registered", u))
			if verifySeed(d, fourth) != nil || verifySeed(d, third) == nil {
				t.Errorf("after the overlap: want the delivery signed with the new secret only")
			}
			seedSecret = fourth
		})

		t.Run("DisableAndDelete", func(t *testing.T) {
			r := do(t, "PATCH", is.base+"/v1/admin/webhooks/"+seedID, map[string]any{"status": "disabled"}, bearer(admin)...)
			wantStatus(t, "disable", r, http.StatusOK)
			if r.json(t)["status"] != "disabled" {
				t.Fatalf("disable = %s", r.body)
			}
			wantStatus(t, "delete", do(t, "DELETE", is.base+"/v1/admin/webhooks/"+stdID, nil, bearer(admin)...), http.StatusNoContent)
			wantProblem(t, "read deleted", do(t, "GET", is.base+"/v1/admin/webhooks/"+stdID, nil, bearer(admin)...), http.StatusNotFound, "not_found")

			sentinelID, _ := createHook(t, is, admin, map[string]any{"url": rcv.url("/sentinel"), "events": []string{"user.registered"}})
			seedBefore, stdBefore := len(rcv.deliveries("/seed")), len(rcv.deliveries("/standard"))
			u := register(t, is, uniqueEmail())["id"].(string)
			rcv.waitFor(t, "/sentinel", "user.registered", event("user.registered", u))
			if n := len(rcv.deliveries("/seed")); n != seedBefore {
				t.Errorf("disabled endpoint received %d more deliveries, want none", n-seedBefore)
			}
			if n := len(rcv.deliveries("/standard")); n != stdBefore {
				t.Errorf("deleted endpoint received %d more deliveries, want none", n-stdBefore)
			}
			for _, d := range hookDeliveries(t, is, admin, seedID, "") {
				if d["created_at"] != nil && d["event_type"] == "user.registered" && d["status"] == "pending" {
					t.Errorf("disabled endpoint got a delivery queued: %v", d)
				}
			}
			wantStatus(t, "delete sentinel", do(t, "DELETE", is.base+"/v1/admin/webhooks/"+sentinelID, nil, bearer(admin)...), http.StatusNoContent)
		})

		t.Run("RetryThenSuccess", func(t *testing.T) {
			rcv.setRespond("/flaky", func(n int) int {
				if n == 0 {
					return http.StatusInternalServerError
				}
				return http.StatusNoContent
			})
			id, secret := createHook(t, is, admin, map[string]any{"url": rcv.url("/flaky"), "events": []string{"user.registered"}})
			u := register(t, is, uniqueEmail())["id"].(string)
			d := waitDelivery(t, is, admin, id, "delivered", func(d map[string]any) bool { return d["status"] == "delivered" })
			got := rcv.deliveries("/flaky")
			if len(got) != 2 || got[0].event.ID != got[1].event.ID || got[0].event.ID != d["event_id"] || got[0].event.Data["user_id"] != u {
				t.Fatalf("flaky endpoint got %d deliveries, want 2 of one event %v", len(got), d["event_id"])
			}
			if d["attempts"] != float64(2) || d["last_status_code"] != float64(204) {
				t.Errorf("delivery after a 500 and a 204 = %v, want 2 attempts, last status 204", d)
			}
			if verifySeed(got[1], secret) != nil {
				t.Errorf("the retry does not verify")
			}
		})

		t.Run("DeadLetterAndRedeliver", func(t *testing.T) {
			rcv.setRespond("/dead", func(int) int { return http.StatusInternalServerError })
			id, secret := createHook(t, is, admin, map[string]any{"url": rcv.url("/dead"), "events": []string{"user.registered"}})
			u := register(t, is, uniqueEmail())["id"].(string)
			failed := waitDelivery(t, is, admin, id, "failed", func(d map[string]any) bool { return d["status"] == "failed" })
			if failed["attempts"] != float64(2) || failed["last_status_code"] != float64(500) || failed["next_attempt_at"] != nil {
				t.Errorf("dead-lettered delivery = %v, want 2 attempts (--webhook-max-attempts), last status 500, no next attempt", failed)
			}
			if n := len(hookDeliveries(t, is, admin, id, "failed")); n != 1 {
				t.Errorf("?status=failed lists %d deliveries, want 1", n)
			}
			if n := len(hookDeliveries(t, is, admin, id, "pending")); n != 0 {
				t.Errorf("?status=pending lists %d deliveries, want 0", n)
			}
			if n := len(rcv.deliveries("/dead")); n != 2 {
				t.Errorf("dead endpoint received %d attempts, want 2", n)
			}

			rcv.setRespond("/dead", nil)
			r := do(t, "POST", is.base+"/v1/admin/webhooks/deliveries/"+failed["id"].(string)+"/retry", nil, bearer(admin)...)
			wantStatus(t, "redeliver", r, http.StatusAccepted)
			got := rcv.waitCount(t, "/dead", 3)
			if got[2].event.ID != failed["event_id"] || got[2].event.ID != got[0].event.ID || !slices.Equal(got[2].body, got[0].body) {
				t.Errorf("redelivery id = %s, want the event id %v with the same body", got[2].event.ID, failed["event_id"])
			}
			if verifySeed(got[2], secret) != nil {
				t.Errorf("the redelivery does not verify")
			}
			if got[2].event.Data["user_id"] != u {
				t.Errorf("redelivery data = %v, want user_id %s", got[2].event.Data, u)
			}
			waitDelivery(t, is, admin, id, "delivered after the redelivery", func(d map[string]any) bool {
				return d["id"] == failed["id"] && d["status"] == "delivered"
			})
			wantProblem(t, "redeliver unknown", do(t, "POST", is.base+"/v1/admin/webhooks/deliveries/nope/retry", nil, bearer(admin)...),
				http.StatusNotFound, "not_found")
		})
	})
}

// TestWebhookRetrySignals: what the receiver answers steers the retries.
// A redirect is a failure and is not followed; an answer that does not
// come within --webhook-timeout is a failure; both are retried with the
// same event and then delivered. A 503 with Retry-After puts the next
// attempt that far out instead of the short backoff.
func TestWebhookRetrySignals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		rcv := newHookReceiver(t, "")
		is := webhookIssuer(t, dbURL, "--webhook-timeout", "1s", "--webhook-max-attempts", "5")
		admin := webhookAdmin(t, is)
		firstThen := func(first int) func(n int) int {
			return func(n int) int {
				if n == 0 {
					return first
				}
				return http.StatusNoContent
			}
		}
		rcv.setRespond("/redirect", firstThen(http.StatusFound))
		rcv.setRespond("/slow", firstThen(hang))
		rcv.setRespond("/later", firstThen(http.StatusServiceUnavailable))
		ids := map[string]string{}
		for _, path := range []string{"/redirect", "/slow", "/later"} {
			ids[path], _ = createHook(t, is, admin, map[string]any{"url": rcv.url(path), "events": []string{"user.registered"}})
		}
		register(t, is, uniqueEmail())

		for _, path := range []string{"/redirect", "/slow"} {
			d := waitDelivery(t, is, admin, ids[path], "delivered", func(d map[string]any) bool { return d["status"] == "delivered" })
			got := rcv.deliveries(path)
			if len(got) < 2 || got[0].event.ID != got[len(got)-1].event.ID || got[0].event.ID != d["event_id"] {
				t.Errorf("%s got %d deliveries, want a failed first attempt and a retry of the same event %v", path, len(got), d["event_id"])
			}
			if a, _ := d["attempts"].(float64); a < 2 {
				t.Errorf("%s delivery = %v, want at least 2 attempts", path, d)
			}
		}
		if n := len(rcv.deliveries("/redirected")); n != 0 {
			t.Errorf("the redirect was followed %d times, want never", n)
		}

		d := waitDelivery(t, is, admin, ids["/later"], "tried once", func(d map[string]any) bool { return d["attempts"] == float64(1) })
		last, err1 := time.Parse(time.RFC3339, fmt.Sprint(d["last_attempt_at"]))
		next, err2 := time.Parse(time.RFC3339, fmt.Sprint(d["next_attempt_at"]))
		if err1 != nil || err2 != nil || d["status"] != "pending" || d["last_status_code"] != float64(503) {
			t.Fatalf("delivery after a 503 = %v, want pending with both times and status 503", d)
		}
		if gap := next.Sub(last); gap < 3590*time.Second {
			t.Errorf("next attempt %s after the 503 with Retry-After: 3600, want about an hour (the backoff alone is 200ms)", gap)
		}
		if n := len(rcv.deliveries("/later")); n != 1 {
			t.Errorf("/later got %d attempts, want 1 while Retry-After holds", n)
		}
	})
}

// TestWebhookRegistrationRefused: the URL rules hold at registration, for
// the API and the command line alike, with and without the allow-list.
func TestWebhookRegistrationRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := webhookIssuer(t, dbURL)
		admin := webhookAdmin(t, is)
		for _, u := range []string{
			"https://10.0.0.1/hook", "https://[::1]/hook", "https://user:pw@example.com/hook", "https://169.254.169.254/latest",
			"https://[::ffff:10.0.0.1]/hook", "https://localhost/hook", "ftp://example.com/hook", "http://10.0.0.1/hook",
		} {
			r := do(t, "POST", is.base+"/v1/admin/webhooks", map[string]any{"url": u, "events": []string{"*"}}, bearer(admin)...)
			wantProblem(t, "register "+u, r, http.StatusBadRequest, "validation_failed")
			if !strings.Contains(string(r.body), `"field":"url"`) {
				t.Errorf("register %s = %s, want the field url named", u, r.body)
			}
		}
		for _, tc := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"NoEvents", `{"url":"https://example.com/h","events":[]}`, 400, "validation_failed"},
			{"UnknownEvent", `{"url":"https://example.com/h","events":["user.updated"]}`, 400, "validation_failed"},
			{"Format", `{"url":"https://example.com/h","events":["*"],"format":"svix"}`, 400, "validation_failed"},
			{"EventsNotList", `{"url":"https://example.com/h","events":"*"}`, 400, "malformed_request"},
			{"NotJSON", `url=https://example.com`, 400, "malformed_request"},
		} {
			wantProblem(t, tc.name, do(t, "POST", is.base+"/v1/admin/webhooks", tc.body, bearer(admin)...), tc.status, tc.code)
		}
		// Without --webhook-allow-cidr (the command line is given none),
		// loopback is refused in every spelling.
		for _, u := range []string{"http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://0x7f000001/hook", "https://127.1/hook", "https://2130706433/hook"} {
			out, err := is.cli(t, "", "webhooks", "create", "--url", u, "--event", "*")
			if err == nil || !strings.Contains(out, "url") {
				t.Errorf("webhooks create --url %s = %v, %s; want it refused naming the url", u, err, out)
			}
		}
		// With it, the receiver's loopback address over http is accepted.
		out, err := is.cli(t, "", "webhooks", "create", "--url", "http://127.0.0.1:9/hook", "--event", "*", "--webhook-allow-cidr", "127.0.0.1/32")
		if err != nil || !strings.Contains(out, "secret: ") {
			t.Errorf("webhooks create with the allow-list = %v, %s; want it created with its secret", err, out)
		}
		r := do(t, "GET", is.base+"/v1/admin/webhooks", nil, bearer(admin)...)
		wantStatus(t, "list", r, http.StatusOK)
		if strings.Contains(string(r.body), "secret") || !strings.Contains(string(r.body), "http://127.0.0.1:9/hook") {
			t.Errorf("list = %s, want the CLI's endpoint and no secret", r.body)
		}

		// The rest of the command line on that endpoint, audited via cli.
		out, err = is.cli(t, "", "webhooks", "list", "--json")
		var listed struct{ ID, URL string }
		if err != nil || json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &listed) != nil || listed.URL != "http://127.0.0.1:9/hook" {
			t.Fatalf("webhooks list --json = %v, %s", err, out)
		}
		for _, args := range [][]string{
			{"webhooks", "deliveries", listed.ID, "--status", "failed", "--json"},
			{"webhooks", "rotate-secret", listed.ID, "--overlap", "0"},
			{"webhooks", "delete", listed.ID},
		} {
			if out, err := is.cli(t, "", args...); err != nil || strings.Contains(out, "secret: ") != (args[1] == "rotate-secret") {
				t.Errorf("%v = %v, %s", args, err, out)
			}
		}
		if out, err := is.cli(t, "", "webhooks", "retry", "no-such-delivery"); err == nil || !strings.Contains(out, "No such webhook delivery") {
			t.Errorf("webhooks retry of an unknown delivery = %v, %s; want it refused", err, out)
		}
		if out, _ := is.cli(t, "", "webhooks", "list", "--json"); strings.TrimSpace(out) != "" {
			t.Errorf("webhooks list after delete = %q, want nothing", out)
		}
		r = do(t, "GET", is.base+"/v1/admin/audit?type=webhook.deleted", nil, bearer(admin)...)
		wantStatus(t, "audit", r, http.StatusOK)
		if !strings.Contains(string(r.body), `"via":"cli"`) || !strings.Contains(string(r.body), listed.ID) {
			t.Errorf("audit of webhook.deleted = %s, want the CLI's deletion with via cli", r.body)
		}
	})
}

// TestWebhookSurvivesCrash: deliveries pending when the issuer is killed
// (SIGKILL: no shutdown at all) while the receiver is down all arrive once
// the receiver is up and the next issuer starts over the same database.
func TestWebhookSurvivesCrash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // the receiver is down
		flags := []string{"--webhook-timeout", "1s"}
		first := webhookIssuer(t, dbURL, flags...)
		admin := webhookAdmin(t, first)
		id, secret := createHook(t, first, admin, map[string]any{"url": "http://" + addr + "/hook", "events": []string{"user.registered"}})
		var users []string
		for range 5 {
			users = append(users, register(t, first, uniqueEmail())["id"].(string))
		}
		waitDelivery(t, first, admin, id, "tried while the receiver is down", func(d map[string]any) bool {
			return d["status"] == "pending" && d["attempts"] != float64(0)
		})
		if err := first.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-first.exited

		rcv := newHookReceiver(t, addr)
		second := startIssuerWithKEK(t, dbURL, first.kek, append([]string{"--webhook-allow-cidr", "127.0.0.1/32", "--webhook-retry-backoff", "200ms"}, flags...)...)
		for _, u := range users {
			d := rcv.waitFor(t, "/hook", "user.registered of "+u, event("user.registered", u))
			if err := verifySeed(d, secret); err != nil {
				t.Errorf("delivery after the restart: webhook.Verify = %v", err)
			}
		}
		_ = second
	})
}

// TestWebhookTwoIssuersExactlyOnce: two issuers over one PostgreSQL, both
// dispatching, send each event to the endpoint once.
func TestWebhookTwoIssuersExactlyOnce(t *testing.T) {
	t.Parallel()
	dbURL := testdb.Postgres(t)
	rcv := newHookReceiver(t, "")
	flags := []string{"--webhook-allow-cidr", "127.0.0.1/32", "--webhook-retry-backoff", "200ms"}
	a := startIssuer(t, dbURL, flags...)
	b := startIssuerWithKEK(t, dbURL, a.kek, flags...)
	admin := webhookAdmin(t, a)
	id, _ := createHook(t, a, admin, map[string]any{"url": rcv.url("/hook"), "events": []string{"user.registered"}})
	const n = 20
	var users []string
	for i := range n {
		is := a
		if i%2 == 1 {
			is = b
		}
		users = append(users, register(t, is, uniqueEmail())["id"].(string))
	}
	for _, u := range users {
		rcv.waitFor(t, "/hook", "user.registered of "+u, event("user.registered", u))
	}
	waitDelivery(t, a, admin, id, "all delivered", func(map[string]any) bool {
		return len(hookDeliveries(t, a, admin, id, "delivered")) == n
	})
	seen := map[string]int{}
	for _, d := range rcv.deliveries("/hook") {
		seen[d.event.ID]++
	}
	for eventID, count := range seen {
		if count != 1 {
			t.Errorf("event %s delivered %d times, want once", eventID, count)
		}
	}
	if len(seen) != n {
		t.Errorf("%d events delivered, want %d", len(seen), n)
	}
}
