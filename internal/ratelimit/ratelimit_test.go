package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/ratelimit"
	"github.com/palisade-auth/palisade/internal/ratelimit/ratelimittest"
)

// FuzzParseOverride: --rate-limit either refuses its value or gives a
// known limit within the documented bounds, one that the form it prints
// in (NAME=COUNT/PERIOD) gives back unchanged.
func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{"login=10/1m", " login_email = 3 / 15m ", "register=1/168h", "login=1000001/1s", "login=10/1h30m", "refresh=+5/1.5s", "login=10/1m=2", "=/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		name, l, err := ratelimit.ParseOverride(in)
		if err != nil {
			return
		}
		if _, ok := ratelimit.Defaults()[name]; !ok || l.Count < 1 || l.Count > 1_000_000 || l.Period < time.Second || l.Period > 168*time.Hour {
			t.Fatalf("ParseOverride(%q) = %q, %v: outside the documented names and bounds", in, name, l)
		}
		again, l2, err := ratelimit.ParseOverride(name + "=" + l.String())
		if err != nil || again != name || l2 != l {
			t.Errorf("ParseOverride(%q) = %q, %v; its printed form %q gives %q, %v, %v", in, name, l, name+"="+l.String(), again, l2, err)
		}
	})
}

// A count whose interval is not a whole number of microseconds (the
// database and memory stores count in those) passes no more than the
// count: 300000/1s is 3.33 µs each, and with the interval rounded down to
// 3 a burst of 333333 went through.
func TestBurstNeverExceedsTheCount(t *testing.T) {
	st := ratelimit.NewMemory()
	l := ratelimit.Limit{Count: 300_000, Period: time.Second}
	now := time.Unix(1_900_000_000, 0)
	passed := 0
	for range l.Count + 1000 {
		r, err := st.Take(context.Background(), "k", l, now)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			passed++
		}
	}
	if passed != l.Count {
		t.Errorf("a burst at one instant passed %d requests of %s, want %d", passed, l, l.Count)
	}
}

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
		{"login_email_client=5/15m", ratelimit.LoginEmailClient, ratelimit.Limit{5, 15 * time.Minute}, false},
		{"password_change=3/1h", ratelimit.PasswordChange, ratelimit.Limit{3, time.Hour}, false},
		{"password_forgot_email=2/1h", ratelimit.PasswordForgotEmail, ratelimit.Limit{2, time.Hour}, false},
		{"login_known_client=1/1h", "", ratelimit.Limit{}, true}, // a mark, not a limit
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

func (brokenStore) Take(context.Context, string, ratelimit.Limit, time.Time) (ratelimit.Result, error) {
	return ratelimit.Result{}, errors.New("connection refused")
}
func (brokenStore) Reset(context.Context, string) error {
	return errors.New("connection refused")
}
func (brokenStore) Mark(context.Context, string, time.Time, time.Duration) error {
	return errors.New("connection refused")
}
func (brokenStore) Marked(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("connection refused")
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
			if err != nil || !d.Allowed || d.Remaining != spec.Count-1 {
				t.Errorf("Allow(%s) with a broken store = %+v, %v; want allowed, counted in memory (fails open)", name, d, err)
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

// While the store fails, a fail-open limit still holds in each replica:
// its requests are counted in the replica's memory. Before, they all
// passed, and a burst of forgot-password requests from one address, whose
// store calls timed out while Redis connections were being opened, put
// 100 reset mails into one account's outbox.
func TestFailOpenCountsInMemory(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := ratelimit.New(brokenStore{}, []string{"password_forgot=3/1h"}, time.Now, discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d, err := l.Allow(context.Background(), ratelimit.PasswordForgot, "198.51.100.1")
		if err != nil || !d.Allowed || d.Remaining != 2-i || d.Limit != 3 {
			t.Fatalf("request %d with the store down = %+v, %v; want allowed, %d remaining of 3", i+1, d, err, 2-i)
		}
	}
	d, err := l.Allow(context.Background(), ratelimit.PasswordForgot, "198.51.100.1")
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("request 4 with the store down = %+v, %v; want limited, with a time to retry", d, err)
	}
	if d, err := l.Allow(context.Background(), ratelimit.PasswordForgot, "198.51.100.2"); err != nil || !d.Allowed {
		t.Errorf("another address with the store down = %+v, %v; want allowed: it has its own count", d, err)
	}
	if got := counterValue(t, reg, "issuer_rate_limit_decisions_total", map[string]string{"limit": ratelimit.PasswordForgot, "outcome": "limited"}); got != 1 {
		t.Errorf("issuer_rate_limit_decisions_total{limited} = %v, want 1", got)
	}
	if got := counterValue(t, reg, "issuer_rate_limit_store_errors_total", map[string]string{"limit": ratelimit.PasswordForgot, "fail": "open"}); got != 5 {
		t.Errorf("issuer_rate_limit_store_errors_total{fail=open} = %v, want 5", got)
	}
}

// busyStore is a store whose every connection is busy: the issuer's own
// overload (ratelimit.ErrBusy).
type busyStore struct{ brokenStore }

func (busyStore) Take(context.Context, string, ratelimit.Limit, time.Time) (ratelimit.Result, error) {
	return ratelimit.Result{}, fmt.Errorf("redis take: %w", ratelimit.ErrBusy)
}

// TestBusyStoreRefusesEveryLimit: a store too busy to take the call is
// the issuer's overload, not an outage: every limit refuses, the fail-open
// ones too (letting them through let a burst of concurrent requests pass
// them), and so does every later call of the same request.
func TestBusyStoreRefusesEveryLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := ratelimit.New(busyStore{}, nil, time.Now, discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	for name := range ratelimit.Defaults() {
		if d, err := l.Allow(context.Background(), name, "x"); !errors.Is(err, ratelimit.ErrStore) || d.Allowed {
			t.Errorf("Allow(%s) with every connection busy = %+v, %v; want ratelimit.ErrStore", name, d, err)
		}
		if got := counterValue(t, reg, "issuer_rate_limit_store_errors_total", map[string]string{"limit": name, "fail": "closed"}); got != 1 {
			t.Errorf("issuer_rate_limit_store_errors_total{limit=%q,fail=closed} = %v, want 1", name, got)
		}
	}
	// One request: its first call finds the store busy, its second (on a
	// fail-open limit) fails at once, and is refused as busy too.
	ctx := l.FailFast(context.Background())
	if _, err := l.Allow(ctx, ratelimit.Login, "x"); !errors.Is(err, ratelimit.ErrBusy) {
		t.Fatalf("first call = %v, want ErrBusy", err)
	}
	swapped, err := ratelimit.New(brokenStore{}, nil, time.Now, discard(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if d, err := swapped.Allow(ctx, ratelimit.PasswordForgot, "x"); !errors.Is(err, ratelimit.ErrStore) || !errors.Is(err, ratelimit.ErrBusy) || d.Allowed {
		t.Errorf("a later call of the request on a fail-open limit = %+v, %v; want refused as busy", d, err)
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

// A reset gives the subject its whole quota back, for that limit only.
func TestReset(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	l, err := ratelimit.New(ratelimit.NewMemory(), []string{"login_email=2/1h", "login_email_client=2/1h"}, func() time.Time { return now }, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{ratelimit.LoginEmail, ratelimit.LoginEmailClient} {
		for i := 0; i < 3; i++ {
			_, _ = l.Allow(ctx, name, "a@example.com")
		}
	}
	if err := l.Reset(ctx, ratelimit.LoginEmail, "a@example.com"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	for i := 0; i < 2; i++ {
		if d, err := l.Allow(ctx, ratelimit.LoginEmail, "a@example.com"); err != nil || !d.Allowed {
			t.Fatalf("Allow(login_email) #%d after Reset = %+v, %v; want allowed", i+1, d, err)
		}
	}
	if d, _ := l.Allow(ctx, ratelimit.LoginEmailClient, "a@example.com"); d.Allowed {
		t.Errorf("Allow(login_email_client) after resetting login_email = allowed, want still refused")
	}
	if err := l.Reset(ctx, "nope", "x"); err == nil {
		t.Errorf("Reset(unknown limit): no error")
	}
	if err := (mustNew(t, brokenStore{})).Reset(ctx, ratelimit.LoginEmail, "x"); err == nil {
		t.Errorf("Reset with a broken store: no error")
	}
}

// A limit changed starts afresh: the counters a looser limit finds are
// not the old one's, whose state held every used-up subject to the old
// period (Retry-After near an hour under a limit of 10/2s).
func TestChangedLimitStartsAfresh(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { return now }
	st, ctx := ratelimit.NewMemory(), context.Background()
	strict, err := ratelimit.New(st, []string{"refresh=2/1h"}, clock, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = strict.Allow(ctx, ratelimit.Refresh, "192.0.2.1")
	}
	if d, err := strict.Allow(ctx, ratelimit.Refresh, "192.0.2.1"); err != nil || d.Allowed {
		t.Fatalf("third refresh under 2/1h = %+v, %v; want refused", d, err)
	}
	loose, err := ratelimit.New(st, []string{"refresh=10/2s"}, clock, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := loose.Allow(ctx, ratelimit.Refresh, "192.0.2.1"); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("first refresh under 10/2s after 2/1h was used up = %+v, %v; want allowed, 9 left", d, err)
	}
	if err := loose.Reset(ctx, ratelimit.Refresh, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if d, _ := loose.Allow(ctx, ratelimit.Refresh, "192.0.2.1"); d.Remaining != 9 {
		t.Errorf("after Reset under 10/2s, Remaining = %d, want 9: the reset missed the limit's counter", d.Remaining)
	}
}

func mustNew(t *testing.T, st ratelimit.Store) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(st, nil, time.Now, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A remembered client stays remembered for RememberFor after the latest
// Remember, however often it is remembered, and is forgotten after that.
func TestRemember(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	l, err := ratelimit.New(ratelimit.NewMemory(), nil, func() time.Time { return now }, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	subject := ratelimit.LoginSubject("a@example.com", "192.0.2.1")
	remembered := func(what string, want bool) {
		t.Helper()
		got, err := l.Remembered(ctx, ratelimit.KnownLoginClient, subject)
		if err != nil || got != want {
			t.Fatalf("Remembered %s = %v, %v; want %v", what, got, err, want)
		}
	}
	remembered("before any Remember", false)
	if err := l.Remember(ctx, ratelimit.KnownLoginClient, subject); err != nil {
		t.Fatal(err)
	}
	remembered("right after Remember", true)
	if got, _ := l.Remembered(ctx, ratelimit.KnownLoginClient, ratelimit.LoginSubject("a@example.com", "192.0.2.2")); got {
		t.Errorf("another address of the same email is remembered")
	}
	// Remembered again and again, every day for 100 days: the mark follows
	// the latest one.
	for day := 1; day <= 100; day++ {
		now = now.Add(24 * time.Hour)
		if err := l.Remember(ctx, ratelimit.KnownLoginClient, subject); err != nil {
			t.Fatal(err)
		}
		remembered("while logging in daily", true)
	}
	now = now.Add(ratelimit.RememberFor - time.Second)
	remembered("just under RememberFor after the latest Remember", true)
	now = now.Add(ratelimit.RememberFor + time.Second)
	remembered("twice RememberFor after the latest Remember", false)
	if err := l.Reset(ctx, ratelimit.KnownLoginClient, subject); err != nil {
		t.Errorf("Reset(mark): %v", err)
	}
	if _, err := l.Remembered(ctx, "nope", subject); err == nil {
		t.Errorf("Remembered(unknown mark): no error")
	}
	if err := l.Remember(ctx, "nope", subject); err == nil {
		t.Errorf("Remember(unknown mark): no error")
	}
	if _, err := mustNew(t, brokenStore{}).Remembered(ctx, ratelimit.KnownLoginClient, subject); !errors.Is(err, ratelimit.ErrStore) {
		t.Errorf("Remembered with a broken store error = %v, want ratelimit.ErrStore", err)
	}
}

// The login defaults keep the owner reachable: the per-email ceiling is
// looser than the per-pair limit, and the forgot cap's interval stays
// below the reset link's lifetime (see Defaults).
func TestDefaultsShape(t *testing.T) {
	d := ratelimit.Defaults()
	rate := func(n string) float64 { return float64(d[n].Count) / d[n].Period.Seconds() }
	if rate(ratelimit.LoginEmail) <= rate(ratelimit.LoginEmailClient) || d[ratelimit.LoginEmail].Count <= d[ratelimit.LoginEmailClient].Count {
		t.Errorf("login_email %v is not looser than login_email_client %v", d[ratelimit.LoginEmail].Limit, d[ratelimit.LoginEmailClient].Limit)
	}
	if f := d[ratelimit.PasswordForgotEmail]; f.Period/time.Duration(f.Count) >= 30*time.Minute {
		t.Errorf("password_forgot_email %v: interval not below the 30 min reset-link lifetime", f.Limit)
	}
	for _, n := range []string{ratelimit.Login, ratelimit.LoginEmail, ratelimit.LoginEmailClient, ratelimit.PasswordChange, ratelimit.PasswordReset} {
		if d[n].OnStoreError != ratelimit.FailClosed {
			t.Errorf("%s fails %s, want closed (it guards a password or token)", n, d[n].OnStoreError)
		}
	}
}

// TestREADMEDocumentsEveryLimit keeps the README's rate-limit table and
// Defaults in step: every limit with its default and failure policy, and
// nothing else.
func TestREADMEDocumentsEveryLimit(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|[^\\n]*\\| ([0-9]+/[0-9a-z]+) \\| (open|closed) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		documented[m[1]] = m[2] + " " + m[3]
	}
	for name, spec := range ratelimit.Defaults() {
		doc, ok := documented[name]
		if !ok {
			t.Errorf("README: no row for limit %s", name)
			continue
		}
		rate, fail, _ := strings.Cut(doc, " ")
		if _, l, err := ratelimit.ParseOverride(name + "=" + rate); err != nil || l != spec.Limit {
			t.Errorf("README: %s default %s, want %v", name, rate, spec.Limit)
		}
		if fail != spec.OnStoreError.String() {
			t.Errorf("README: %s fails %s, want %s", name, fail, spec.OnStoreError)
		}
	}
	for name := range documented {
		if _, ok := ratelimit.Defaults()[name]; !ok {
			t.Errorf("README documents a limit %s that does not exist", name)
		}
	}
}
