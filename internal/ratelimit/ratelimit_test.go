package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/ratelimittest"
)

func TestMemoryConformance(t *testing.T) {
	ratelimittest.RunTests(t, func(t *testing.T) ratelimit.Store { return ratelimit.NewMemory() })
}

func TestParseOverride(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		limit   ratelimit.Limit
		wantErr bool
	}{
		{"login=10/1m", ratelimit.Login, ratelimit.Limit{10, time.Minute}, false},
		{" login_email = 3 / 15m ", ratelimit.LoginEmail, ratelimit.Limit{3, 15 * time.Minute}, false},
		{"register=1/168h", ratelimit.Register, ratelimit.Limit{1, 168 * time.Hour}, false},
		{"login", "", ratelimit.Limit{}, true},
		{"login=10", "", ratelimit.Limit{}, true},
		{"nope=10/1m", "", ratelimit.Limit{}, true},
		{"login=0/1m", "", ratelimit.Limit{}, true},
		{"login=-1/1m", "", ratelimit.Limit{}, true},
		{"login=x/1m", "", ratelimit.Limit{}, true},
		{"login=10/0s", "", ratelimit.Limit{}, true},
		{"login=10/500ms", "", ratelimit.Limit{}, true},
		{"login=10/1000h", "", ratelimit.Limit{}, true},
		{"login=1000000/1s", ratelimit.Login, ratelimit.Limit{1000000, time.Second}, false},
		{"login=1000001/1s", "", ratelimit.Limit{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, l, err := ratelimit.ParseOverride(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ratelimit.ParseOverride(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if name != tt.name || l != tt.limit {
				t.Errorf("ratelimit.ParseOverride(%q) = %q, %v, want %q, %v", tt.in, name, l, tt.name, tt.limit)
			}
		})
	}
}

func TestNewReportsEveryBadOverride(t *testing.T) {
	_, err := ratelimit.New(ratelimit.NewMemory(), []string{"login=1/1m", "bad", "nope=1/1m"}, time.Now, discard(), nil)
	if err == nil {
		t.Fatal("New with bad overrides: no error")
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Errorf("New: %d errors reported, want 2: %v", n, err)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestDecisions(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { return now }
	reg := prometheus.NewRegistry()
	l, err := ratelimit.New(ratelimit.NewMemory(), []string{"login=3/1m"}, clock, discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, wantRemaining := range []int{2, 1, 0} {
		d, err := l.Allow(ctx, ratelimit.Login, "10.0.0.1")
		if err != nil || !d.Allowed || d.Limit != 3 || d.Remaining != wantRemaining {
			t.Fatalf("Allow #%d = %+v, %v; want allowed, limit 3, remaining %d", i+1, d, err, wantRemaining)
		}
		if want := now.Add(time.Duration(i+1) * 20 * time.Second); !d.ResetAt.Equal(want) {
			t.Errorf("Allow #%d ResetAt = %v, want %v", i+1, d.ResetAt, want)
		}
	}
	d, err := l.Allow(ctx, ratelimit.Login, "10.0.0.1")
	if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 20*time.Second {
		t.Fatalf("Allow over the limit = %+v, %v; want refused, retry after 20s", d, err)
	}
	// Another subject, and the same subject under another limit, are untouched.
	if d, _ := l.Allow(ctx, ratelimit.Login, "10.0.0.2"); !d.Allowed {
		t.Errorf("another address refused")
	}
	if d, _ := l.Allow(ctx, ratelimit.Register, "10.0.0.1"); !d.Allowed {
		t.Errorf("the same address refused under another limit")
	}
	now = now.Add(20 * time.Second)
	if d, _ := l.Allow(ctx, ratelimit.Login, "10.0.0.1"); !d.Allowed || d.Remaining != 0 {
		t.Errorf("after one interval = %+v, want allowed with 0 remaining", d)
	}
	if _, err := l.Allow(ctx, "nope", "x"); err == nil {
		t.Errorf("Allow(unknown limit): no error")
	}
	for outcome, want := range map[string]float64{"allowed": 5, "limited": 1} {
		if got := counterValue(t, reg, "issuer_rate_limit_decisions_total", map[string]string{"limit": ratelimit.Login, "outcome": outcome}); got != want {
			t.Errorf("issuer_rate_limit_decisions_total{limit=login,outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
}

// brokenStore is a store whose database is gone.
type brokenStore struct{}

func (brokenStore) TakeRateLimit(context.Context, string, int64, int64, int64) (int64, bool, error) {
	return 0, false, errors.New("connection refused")
}
func (brokenStore) SweepRateLimits(context.Context, int64) (int64, error) {
	return 0, errors.New("connection refused")
}
func (brokenStore) ResetRateLimit(context.Context, string) error {
	return errors.New("connection refused")
}
func (brokenStore) PeekRateLimit(context.Context, string) (int64, error) {
	return 0, errors.New("connection refused")
}

func TestStoreFailurePolicy(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := ratelimit.New(brokenStore{}, nil, time.Now, discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range ratelimit.Defaults() {
		d, err := l.Allow(context.Background(), name, "x")
		switch spec.OnStoreError {
		case ratelimit.FailOpen:
			if err != nil || !d.Allowed {
				t.Errorf("Allow(%s) with a broken store = %+v, %v; want allowed (fails open)", name, d, err)
			}
		case ratelimit.FailClosed:
			if !errors.Is(err, ratelimit.ErrStore) {
				t.Errorf("Allow(%s) with a broken store error = %v, want ratelimit.ErrStore (fails closed)", name, err)
			}
		}
	}
	for name, spec := range ratelimit.Defaults() {
		fail := spec.OnStoreError.String()
		if got := counterValue(t, reg, "issuer_rate_limit_store_errors_total", map[string]string{"limit": name, "fail": fail}); got != 1 {
			t.Errorf("issuer_rate_limit_store_errors_total{limit=%q,fail=%q} = %v, want 1", name, fail, got)
		}
	}
}

// counterValue reads one counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestSecondsRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, time.Minute: 60} {
		if got := ratelimit.Seconds(d); got != want {
			t.Errorf("ratelimit.Seconds(%v) = %d, want %d", d, got, want)
		}
	}
}
