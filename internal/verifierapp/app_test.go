package verifierapp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// loadedKeys is a KeySet that has always loaded.
type loadedKeys struct{}

func (loadedKeys) Key(context.Context, string) (jwk.Key, error) { return nil, verify.ErrUnknownKey }
func (loadedKeys) Ready() bool                                  { return true }
func (loadedKeys) LoadedAt() time.Time                          { return time.Now() }
func (loadedKeys) Close() error                                 { return nil }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// TestReadyzWaitsForRevocations: /readyz is 503 until the first list has
// loaded, then 200, and reports the list either way; the metrics show its
// staleness and size.
func TestReadyzWaitsForRevocations(t *testing.T) {
	feed := &verifytest.RevocationFeed{}
	feed.RevokeSession("s1", time.Now().Add(time.Hour))
	feed.Fail(http.StatusServiceUnavailable)
	srv := httptest.NewServer(feed)
	defer srv.Close()
	revs, err := verify.NewRevocationSource(context.Background(), srv.URL, verify.RevocationOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer revs.Close()
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg, func() float64 { return 0 })
	m.WithRevocations(reg, func() float64 {
		st, ok := revs.Staleness()
		if !ok {
			return -1
		}
		return st.Seconds()
	}, func() float64 { return float64(revs.Len()) })
	mux := adminMux(reg, Sources{Keys: loadedKeys{}, Revocations: revs})

	var body readiness
	code, raw := get(t, mux, "/readyz")
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		t.Fatalf("GET /readyz body %q: %v", raw, err)
	}
	if code != http.StatusServiceUnavailable || body.Revocations == nil || body.Revocations.Loaded {
		t.Errorf("GET /readyz before the first list = %d %s, want 503 with revocations not loaded", code, raw)
	}

	feed.Fail(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, raw = get(t, mux, "/readyz")
		if code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	body = readiness{}
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		t.Fatalf("GET /readyz body %q: %v", raw, err)
	}
	if code != http.StatusOK || body.Revocations == nil || !body.Revocations.Loaded || body.Revocations.Entries != 1 || body.Revocations.Stale {
		t.Errorf("GET /readyz after the first list = %d %s, want 200 with 1 entry, loaded, not stale", code, raw)
	}

	_, metrics := get(t, mux, "/metrics")
	for _, want := range []string{
		"verifier_revocations_entries 1",
		"verifier_revocations_staleness_seconds ",
		"verifier_revocations_refresh_failures_total 0",
		`verifier_requests_total{outcome="rejected",reason="session_revoked"} 0`,
		`verifier_requests_total{outcome="rejected",reason="key_revoked"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}
