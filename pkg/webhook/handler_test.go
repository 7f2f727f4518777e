package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

// recordingApp is the application behind the Handler in these tests.
type recordingApp struct {
	mu     sync.Mutex
	calls  int
	bodies []string
	ids    []string
	status int // answered; 0 means write nothing
}

func (a *recordingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	id, _ := webhook.IDFromContext(r.Context())
	a.mu.Lock()
	a.calls++
	a.bodies = append(a.bodies, string(b))
	a.ids = append(a.ids, id)
	status := a.status
	a.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
	}
}

func newHandler(t *testing.T, app http.Handler, cfg webhook.Config) *webhook.Handler {
	t.Helper()
	if cfg.Secrets == nil {
		cfg.Secrets = [][]byte{seedSecret}
	}
	h, err := webhook.NewHandler(app, cfg)
	if err != nil {
		t.Fatalf("NewHandler = %v", err)
	}
	return h
}

// delivery is a seed-format request signed at ts.
func delivery(body []byte, ts time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	webhook.SetHeaders(r.Header, seedSecret, seedID, ts, body)
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerRefuses(t *testing.T) {
	now := func() time.Time { return seedTS }
	signed := func(body string) *http.Request { return delivery([]byte(body), seedTS) }
	tests := []struct {
		name string
		req  func() *http.Request
		want int
	}{
		{"GET", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Method = http.MethodGet
			return r
		}, http.StatusMethodNotAllowed},
		{"bad signature", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Header.Set(webhook.HeaderSignature, webhook.Sign([]byte("other"), seedTS, seedBody))
			return r
		}, http.StatusUnauthorized},
		{"body changed", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(string(seedBody), "u1", "u2", 1)))
			return r
		}, http.StatusUnauthorized},
		{"stale", func() *http.Request { return delivery(seedBody, seedTS.Add(-301*time.Second)) }, http.StatusBadRequest},
		{"future", func() *http.Request { return delivery(seedBody, seedTS.Add(301*time.Second)) }, http.StatusBadRequest},
		{"no signature", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Header.Del(webhook.HeaderSignature)
			return r
		}, http.StatusBadRequest},
		{"malformed timestamp", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Header.Set(webhook.HeaderTimestamp, "soon")
			return r
		}, http.StatusBadRequest},
		{"Webhook-Id differs from the signed body", func() *http.Request {
			r := delivery(seedBody, seedTS)
			r.Header.Set(webhook.HeaderID, "another-id")
			return r
		}, http.StatusBadRequest},
		{"signed body not JSON", func() *http.Request { return signed(`not json`) }, http.StatusBadRequest},
		{"signed body without id", func() *http.Request { return signed(`{"type":"user.registered"}`) }, http.StatusBadRequest},
		{"signed body with a number id", func() *http.Request { return signed(`{"id":42}`) }, http.StatusBadRequest},
		{"signed body with an overlong id", func() *http.Request {
			return signed(`{"id":"` + strings.Repeat("x", webhook.MaxIDLength+1) + `"}`)
		}, http.StatusBadRequest},
		{"body over the limit", func() *http.Request {
			return signed(`{"id":"` + strings.Repeat("x", webhook.MaxIDLength) + `",` + strings.Repeat(" ", 64) + `}`)
		}, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &recordingApp{}
			h := newHandler(t, app, webhook.Config{Now: now, MaxBodyBytes: 64 + webhook.MaxIDLength})
			w := serve(h, tt.req())
			if w.Code != tt.want || app.calls != 0 {
				t.Errorf("ServeHTTP(%s) = %d with %d app calls, want %d and none", tt.name, w.Code, app.calls, tt.want)
			}
			if got := w.Header().Get("WWW-Authenticate"); (w.Code == http.StatusUnauthorized) != (got != "") {
				t.Errorf("ServeHTTP(%s) = %d with WWW-Authenticate %q; want one exactly with 401", tt.name, w.Code, got)
			}
			if strings.Contains(w.Body.String(), "webhook:") {
				t.Errorf("ServeHTTP(%s) body = %q; the error detail leaked", tt.name, w.Body.String())
			}
		})
	}
}

func TestHandlerPassesVerifiedBodyAndID(t *testing.T) {
	var got struct{ first, again, id string }
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc, err := r.GetBody()
		if err != nil {
			t.Errorf("GetBody() = %v", err)
			return
		}
		again, _ := io.ReadAll(rc)
		got.first, got.again = string(b), string(again)
		got.id, _ = webhook.IDFromContext(r.Context())
		if r.ContentLength != int64(len(seedBody)) {
			t.Errorf("ContentLength = %d, want %d", r.ContentLength, len(seedBody))
		}
		w.WriteHeader(http.StatusAccepted)
	})
	h := newHandler(t, app, webhook.Config{Now: func() time.Time { return seedTS }})
	if w := serve(h, delivery(seedBody, seedTS)); w.Code != http.StatusAccepted {
		t.Fatalf("ServeHTTP(valid) = %d, want %d", w.Code, http.StatusAccepted)
	}
	if got.first != string(seedBody) || got.again != string(seedBody) || got.id != seedID {
		t.Errorf("app saw body %q, again %q, id %q; want the signed body twice and id %q", got.first, got.again, got.id, seedID)
	}
}

func TestHandlerDuplicates(t *testing.T) {
	now := seedTS
	app := &recordingApp{}
	h := newHandler(t, app, webhook.Config{Now: func() time.Time { return now }})
	steps := []struct {
		name      string
		ts        time.Time // the attempt's timestamp; the clock stands there too
		appStatus int
		want      int
		wantCalls int
	}{
		{"first attempt, app fails", seedTS, http.StatusInternalServerError, http.StatusInternalServerError, 1},
		{"retry is processed", seedTS.Add(30 * time.Second), http.StatusServiceUnavailable, http.StatusServiceUnavailable, 2},
		{"retry succeeds", seedTS.Add(90 * time.Second), 0, http.StatusOK, 3},
		{"redelivery is acknowledged without the app", seedTS.Add(200 * time.Second), http.StatusInternalServerError, http.StatusOK, 3},
		{"replay of the same request too", seedTS.Add(90 * time.Second), http.StatusInternalServerError, http.StatusOK, 3},
	}
	for _, st := range steps {
		now = st.ts
		app.status = st.appStatus
		w := serve(h, delivery(seedBody, st.ts))
		if w.Code != st.want || app.calls != st.wantCalls {
			t.Errorf("%s: ServeHTTP = %d after %d app calls, want %d after %d", st.name, w.Code, app.calls, st.want, st.wantCalls)
		}
	}
}

func TestHandlerAppPanicReleasesTheID(t *testing.T) {
	panicking := true
	calls := 0
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if panicking {
			panic(http.ErrAbortHandler)
		}
	})
	h := newHandler(t, app, webhook.Config{Now: func() time.Time { return seedTS }})
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Errorf("recover() = %v, want the app's panic passed on", r)
			}
		}()
		serve(h, delivery(seedBody, seedTS))
	}()
	panicking = false
	if w := serve(h, delivery(seedBody, seedTS)); w.Code != http.StatusOK || calls != 2 {
		t.Errorf("ServeHTTP(retry after a panic) = %d after %d calls, want 200 after 2", w.Code, calls)
	}
}

func TestHandlerConcurrentDeliveriesCallTheAppOnce(t *testing.T) {
	const n = 16
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release // hold the claim until every other delivery has been answered
		}
	})
	h := newHandler(t, app, webhook.Config{Now: func() time.Time { return seedTS }})
	codes := make(chan int, n)
	for range n {
		go func() { codes <- serve(h, delivery(seedBody, seedTS)).Code }()
	}
	got := map[int]int{}
	<-entered
	for range n - 1 {
		got[<-codes]++
	}
	close(release)
	got[<-codes]++
	if calls.Load() != 1 || got[http.StatusOK] != 1 || got[http.StatusServiceUnavailable] != n-1 {
		t.Errorf("%d concurrent deliveries: app called %d times, answers %v; want once, one 200 and %d 503", n, calls.Load(), got, n-1)
	}
	if w := serve(h, delivery(seedBody, seedTS)); w.Code != http.StatusOK || calls.Load() != 1 {
		t.Errorf("ServeHTTP(after) = %d with %d calls, want 200 with 1", w.Code, calls.Load())
	}
}

func TestHandlerRetryAfterWhileInProgress(t *testing.T) {
	store := webhook.NewMemoryStore(0, 0)
	if _, err := store.Claim(context.Background(), seedID, seedTS); err != nil {
		t.Fatal(err)
	}
	app := &recordingApp{}
	h := newHandler(t, app, webhook.Config{Store: store, Now: func() time.Time { return seedTS }})
	w := serve(h, delivery(seedBody, seedTS))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || app.calls != 0 {
		t.Errorf("ServeHTTP(id in progress) = %d, Retry-After %q, %d calls; want 503 with Retry-After and no call", w.Code, w.Header().Get("Retry-After"), app.calls)
	}
}

type failingStore struct{ webhook.Store }

func (failingStore) Claim(context.Context, string, time.Time) (webhook.State, error) {
	return 0, errors.New("store down")
}

func TestHandlerStoreError(t *testing.T) {
	app := &recordingApp{}
	h := newHandler(t, app, webhook.Config{Store: failingStore{}, Now: func() time.Time { return seedTS }})
	if w := serve(h, delivery(seedBody, seedTS)); w.Code != http.StatusInternalServerError || app.calls != 0 {
		t.Errorf("ServeHTTP(store down) = %d with %d calls, want 500 and none", w.Code, app.calls)
	}
}

func TestHandlerStandardFormat(t *testing.T) {
	app := &recordingApp{}
	h := newHandler(t, app, webhook.Config{
		Format:  webhook.FormatStandard,
		Secrets: [][]byte{[]byte("whsec_c2Vjb25kIGtleQ=="), []byte(swSecret)},
		Now:     func() time.Time { return time.Unix(swTS, 0) },
	})
	req := func(sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(swBody))
		r.Header.Set("webhook-id", swID)
		r.Header.Set("webhook-timestamp", "1614265330")
		r.Header.Set("webhook-signature", sig)
		return r
	}
	for i, tt := range []struct {
		sig       string
		want      int
		wantCalls int
	}{
		{swOtherSig, http.StatusUnauthorized, 0},
		{swOtherSig + " " + swSig, http.StatusOK, 1},
		{swSig, http.StatusOK, 1}, // duplicate
	} {
		if w := serve(h, req(tt.sig)); w.Code != tt.want || app.calls != tt.wantCalls {
			t.Errorf("%d: ServeHTTP(signature %q) = %d after %d calls, want %d after %d", i, tt.sig, w.Code, app.calls, tt.want, tt.wantCalls)
		}
	}
	if len(app.ids) != 1 || app.ids[0] != swID || app.bodies[0] != swBody {
		t.Errorf("app saw ids %q bodies %q, want [%q] [%q]", app.ids, app.bodies, swID, swBody)
	}
}

func TestNewHandlerErrors(t *testing.T) {
	app := &recordingApp{}
	tests := []struct {
		name string
		app  http.Handler
		cfg  webhook.Config
		want error // nil: any error
	}{
		{"nil app", nil, webhook.Config{Secrets: [][]byte{seedSecret}}, nil},
		{"unknown format", app, webhook.Config{Format: "svix", Secrets: [][]byte{seedSecret}}, nil},
		{"no secrets", app, webhook.Config{}, webhook.ErrInvalidSecret},
		{"empty secret", app, webhook.Config{Secrets: [][]byte{seedSecret, {}}}, webhook.ErrInvalidSecret},
		{"standard secret not base64", app, webhook.Config{Format: webhook.FormatStandard, Secrets: [][]byte{seedSecret}}, webhook.ErrInvalidSecret},
	}
	for _, tt := range tests {
		h, err := webhook.NewHandler(tt.app, tt.cfg)
		if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("NewHandler(%s) = %v, %v; want an error wrapping %v", tt.name, h, err, tt.want)
		}
	}
}
