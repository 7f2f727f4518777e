package verify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// newManualRemote returns a RemoteSource without its background loop, on
// the fake clock.
func newManualRemote(t *testing.T, srv *jwksServer, clk *clocktest.Clock, opts verify.RemoteOptions) *verify.RemoteSource {
	t.Helper()
	opts.Now = clk.Now
	s, err := verify.NewManualRemoteSource(context.Background(), srv.url(), opts)
	if err != nil {
		t.Fatalf("NewRemoteSource = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustRefresh(t *testing.T, s *verify.RemoteSource) {
	t.Helper()
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
}

// remoteVerifier verifies against src with the fixture's issuer and
// audience on clk.
func remoteVerifier(t *testing.T, src verify.KeySource, clk *clocktest.Clock, cacheSize int) *verify.Verifier {
	t.Helper()
	v, err := verify.New(src, verify.Config{Issuer: issuer, Audience: audience, Now: clk.Now, CacheSize: cacheSize})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRemoteSourceNotReady(t *testing.T) {
	ks := getFixture().ks
	srv := newJWKSServer(t, ks)
	srv.serve(http.StatusInternalServerError, []byte("down"), "")
	clk := clocktest.New(now)
	s := newManualRemote(t, srv, clk, verify.RemoteOptions{})
	ctx := context.Background()

	if s.Ready() || !s.LoadedAt().IsZero() {
		t.Fatalf("Ready, LoadedAt = %v, %v before any fetch, want false, zero", s.Ready(), s.LoadedAt())
	}
	_, err := s.Key(ctx, "test-1")
	if !errors.Is(err, verify.ErrNotReady) || errors.Is(err, verify.ErrUnknownKey) {
		t.Errorf("Key(test-1) = %v, want ErrNotReady and not ErrUnknownKey", err)
	}
	v := remoteVerifier(t, s, clk, 0)
	_, err = v.Verify(ctx, ks.Token(t, "user-1"))
	if got := verify.ReasonOf(err); got != verify.ReasonUnknownKey || !errors.Is(err, verify.ErrNotReady) {
		t.Errorf("Verify = %q (%v), want %q wrapping ErrNotReady", got, err, verify.ReasonUnknownKey)
	}

	srv.serve(http.StatusOK, nil, "max-age=60")
	mustRefresh(t, s)
	if !s.Ready() || !s.LoadedAt().Equal(now) {
		t.Errorf("Ready, LoadedAt = %v, %v after a fetch, want true, %v", s.Ready(), s.LoadedAt(), now)
	}
	if _, err := v.Verify(ctx, ks.Token(t, "user-1")); err != nil {
		t.Errorf("Verify when ready = %v, want nil", err)
	}
}

func TestRemoteSourceSchedule(t *testing.T) {
	ks := getFixture().ks
	tests := []struct {
		name         string
		cacheControl string
		age          string
		want         time.Duration
	}{
		{"80% of max-age", "public, max-age=600", "", 480 * time.Second},
		{"verifytest default", "public, max-age=60", "", 48 * time.Second},
		{"age subtracted", "max-age=600", "100", 400 * time.Second},
		{"short max-age honoured", "max-age=10", "", 8 * time.Second},
		{"clamped to min", "max-age=1", "", time.Second},
		{"max-age=0", "max-age=0", "", time.Second},
		{"clamped to max", "max-age=86400", "", time.Hour},
		{"no-store", "no-store, max-age=600", "", 30 * time.Second},
		{"no-cache", "no-cache", "", 30 * time.Second},
		{"no header", "", "", 5 * time.Minute},
		{"unparsable", "max-age=soon", "", 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, ks)
			srv.serve(http.StatusOK, nil, tt.cacheControl)
			if tt.age != "" {
				inner := srv.Config.Handler
				srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Age", tt.age)
					inner.ServeHTTP(w, r)
				})
			}
			clk := clocktest.New(now)
			s := newManualRemote(t, srv, clk, verify.RemoteOptions{})
			ctx := context.Background()
			if due, err := s.RefreshIfDue(ctx); !due || err != nil {
				t.Fatalf("RefreshIfDue at start = %v, %v, want true, nil", due, err)
			}
			if got := s.NextRefresh().Sub(now); got != tt.want {
				t.Errorf("NextRefresh = now+%v, want now+%v", got, tt.want)
			}
			clk.Advance(tt.want - time.Second)
			if due, _ := s.RefreshIfDue(ctx); due || srv.fetches.Load() != 1 {
				t.Errorf("RefreshIfDue before due = %v with %d fetches, want false with 1", due, srv.fetches.Load())
			}
			clk.Advance(time.Second)
			if due, err := s.RefreshIfDue(ctx); !due || err != nil || srv.fetches.Load() != 2 {
				t.Errorf("RefreshIfDue when due = %v, %v with %d fetches, want true, nil with 2", due, err, srv.fetches.Load())
			}
		})
	}
}

func TestRemoteSourceUnknownKidSingleFlight(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Now = clock
	srv := newJWKSServer(t, ks)
	clk := clocktest.New(now)
	s := newManualRemote(t, srv, clk, verify.RemoteOptions{})
	mustRefresh(t, s)
	v := remoteVerifier(t, s, clk, 0)

	ks.Rotate(t) // the issuer publishes test-2 and signs with it
	tok := ks.Token(t, "user-1")
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = v.Verify(context.Background(), tok) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Verify #%d with a new kid = %v, want nil", i, err)
		}
	}
	if got := srv.fetches.Load(); got != 2 {
		t.Errorf("fetches = %d, want 2 (the first load and one refetch)", got)
	}
}

func TestRemoteSourceUnknownKidLimits(t *testing.T) {
	ks := getFixture().ks
	srv := newJWKSServer(t, ks)
	clk := clocktest.New(now)
	s := newManualRemote(t, srv, clk, verify.RemoteOptions{
		UnknownKidRefetchInterval: 10 * time.Second,
		NegativeCacheTTL:          30 * time.Second,
		NegativeCacheSize:         2,
	})
	mustRefresh(t, s)
	steps := []struct {
		name        string
		at          time.Duration // since the start
		kid         string
		wantFetches int64
	}{
		{"unknown kid refetches", 0, "a", 2},
		{"second kid within the interval", 5 * time.Second, "b", 2},
		{"first kid remembered past the interval", 11 * time.Second, "a", 2},
		{"new kid after the interval", 12 * time.Second, "c", 3},
		{"remembered", 13 * time.Second, "c", 3},
		{"forgotten after its ttl", 45 * time.Second, "a", 4},
		{"known kid never fetches", 46 * time.Second, "test-1", 4},
		{"bound: b is remembered", 60 * time.Second, "b", 5},
		{"bound: d fills the cache, which starts over", 75 * time.Second, "d", 6},
		{"bound: b was dropped", 90 * time.Second, "b", 7},
	}
	for _, st := range steps {
		clk.Advance(st.at - clk.Now().Sub(now))
		_, err := s.Key(context.Background(), st.kid)
		if st.kid == "test-1" {
			if err != nil {
				t.Errorf("%s: Key(%q) = %v, want nil", st.name, st.kid, err)
			}
		} else if !errors.Is(err, verify.ErrUnknownKey) {
			t.Errorf("%s: Key(%q) = %v, want ErrUnknownKey", st.name, st.kid, err)
		}
		if got := srv.fetches.Load(); got != st.wantFetches {
			t.Fatalf("%s: fetches = %d, want %d", st.name, got, st.wantFetches)
		}
	}
}

func TestRemoteSourceFailuresKeepGoodSet(t *testing.T) {
	f := getFixture()
	tests := []struct {
		name    string
		breakIt func(*jwksServer)
	}{
		{"status 500", func(s *jwksServer) { s.serve(http.StatusInternalServerError, nil, "") }},
		{"status 404", func(s *jwksServer) { s.serve(http.StatusNotFound, []byte(`{"keys":[]}`), "") }},
		{"garbage", func(s *jwksServer) { s.serve(http.StatusOK, []byte("<html>oops</html>"), "") }},
		{"empty set", func(s *jwksServer) { s.serve(http.StatusOK, []byte(`{"keys":[]}`), "") }},
		{"unusable keys only", func(s *jwksServer) {
			s.serve(http.StatusOK, []byte(`{"keys":[{"kty":"oct","kid":"x","k":""}]}`), "")
		}},
		{"oversized", func(s *jwksServer) {
			s.serve(http.StatusOK, []byte(`{"keys":[],"pad":"`+strings.Repeat("x", 8192)+`"}`), "")
		}},
		{"server down", func(s *jwksServer) { s.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, f.ks)
			clk := clocktest.New(now)
			var reported []error
			var mu sync.Mutex
			s := newManualRemote(t, srv, clk, verify.RemoteOptions{
				MaxSetBytes: 4096,
				OnRefresh: func(err error) {
					mu.Lock()
					defer mu.Unlock()
					reported = append(reported, err)
				},
			})
			mustRefresh(t, s)
			tt.breakIt(srv)
			clk.Advance(time.Minute)
			ctx := context.Background()
			for i, wantDelay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
				if due, err := s.RefreshIfDue(ctx); !due || err == nil {
					t.Fatalf("RefreshIfDue #%d = %v, %v, want true and an error", i, due, err)
				}
				if got := s.NextRefresh().Sub(clk.Now()); got != wantDelay {
					t.Errorf("retry #%d after %v, want %v", i, got, wantDelay)
				}
				clk.Advance(wantDelay)
			}
			if !s.Ready() || !s.LoadedAt().Equal(now) {
				t.Errorf("Ready, LoadedAt = %v, %v, want true, %v (the good set)", s.Ready(), s.LoadedAt(), now)
			}
			if _, err := s.Key(ctx, "test-1"); err != nil {
				t.Errorf("Key(test-1) = %v, want the key of the last good set", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reported) != 4 || reported[0] != nil || reported[3] == nil {
				t.Errorf("OnRefresh saw %v, want nil then three errors", reported)
			}
		})
	}
}

func TestRemoteSourceRotation(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Now = clock
	srv := newJWKSServer(t, ks)
	clk := clocktest.New(now)
	s := newManualRemote(t, srv, clk, verify.RemoteOptions{})
	mustRefresh(t, s)
	ctx := context.Background()
	oldTok := ks.Token(t, "user-1")

	ks.Rotate(t)
	mustRefresh(t, s)
	for _, kid := range []string{"test-1", "test-2"} {
		if _, err := s.Key(ctx, kid); err != nil {
			t.Errorf("Key(%s) after rotation = %v, want nil", kid, err)
		}
	}

	// The issuer retires test-1: it must be forgotten, with its tokens.
	set := ks.PublicSet()
	old, _ := set.LookupKeyID("test-1")
	if err := set.RemoveKey(old); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(http.StatusOK, body, "max-age=60")
	mustRefresh(t, s)
	if _, err := s.Key(ctx, "test-1"); !errors.Is(err, verify.ErrUnknownKey) {
		t.Errorf("Key(test-1) after removal = %v, want ErrUnknownKey", err)
	}
	v := remoteVerifier(t, s, clk, 0)
	if _, err := v.Verify(ctx, oldTok); verify.ReasonOf(err) != verify.ReasonUnknownKey {
		t.Errorf("Verify(token of a removed key) = %v, want reason %q", err, verify.ReasonUnknownKey)
	}
	if _, err := v.Verify(ctx, ks.Token(t, "user-1")); err != nil {
		t.Errorf("Verify(token of the current key) = %v, want nil", err)
	}
}

func TestRemoteSourceBackground(t *testing.T) {
	ks := getFixture().ks
	srv := newJWKSServer(t, ks)
	refreshed := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := verify.NewRemoteSource(ctx, srv.url(), verify.RemoteOptions{
		OnRefresh: func(err error) {
			select {
			case refreshed <- err:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refreshed:
		if err != nil {
			t.Fatalf("first background fetch = %v, want nil", err)
		}
	case <-time.After(10 * time.Second): // a guard, not a timing assumption
		t.Fatal("no background fetch")
	}
	if !s.Ready() {
		t.Error("Ready = false after the background fetch")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.Key(context.Background(), "test-1"); err != nil {
		t.Errorf("Key after Close = %v, want the loaded key", err)
	}
}

func TestNewRemoteSourceErrors(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts verify.RemoteOptions
	}{
		{"empty url", "", verify.RemoteOptions{}},
		{"relative url", "/jwks.json", verify.RemoteOptions{}},
		{"other scheme", "file:///etc/jwks.json", verify.RemoteOptions{}},
		{"negative interval", "https://issuer.test/jwks", verify.RemoteOptions{UnknownKidRefetchInterval: -time.Second}},
		{"negative size", "https://issuer.test/jwks", verify.RemoteOptions{MaxSetBytes: -1}},
		{"min above max", "https://issuer.test/jwks", verify.RemoteOptions{MinRefresh: time.Hour, MaxRefresh: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := verify.NewRemoteSource(context.Background(), tt.url, tt.opts)
			if err == nil {
				_ = s.Close()
				t.Errorf("NewRemoteSource(%q) = nil error, want one", tt.url)
			}
		})
	}
}
