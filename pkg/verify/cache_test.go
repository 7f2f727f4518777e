package verify_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func newCachedVerifier(t testing.TB, src verify.KeySource, clk *clocktest.Clock, size int, skew time.Duration) *verify.Verifier {
	t.Helper()
	v, err := verify.New(src, verify.Config{
		Issuer: issuer, Audience: audience, Algorithms: []string{"RS256", "HS256"},
		Now: clk.Now, ClockSkew: skew, CacheSize: size,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCacheHit(t *testing.T) {
	f := getFixture()
	clk := clocktest.New(now)
	v := newCachedVerifier(t, verify.NewStaticSource(f.set), clk, 100, 0)
	tok := f.ks.Mint(t, verifytest.Claims{Subject: "user-1", Role: "admin", Audience: []string{"api", "other"}})
	ctx := context.Background()
	first, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatalf("Verify = %v, want nil", err)
	}
	want := *first
	want.Audience = []string{"api", "other"}
	first.Audience[0] = "changed by the caller"
	if v.CacheLen() != 1 {
		t.Fatalf("CacheLen = %d, want 1", v.CacheLen())
	}
	for i := range 2 {
		id, err := v.Verify(ctx, tok)
		if err != nil || !identityEqual(*id, want) {
			t.Fatalf("cached Verify #%d = %+v, %v, want %+v, nil", i, id, err, want)
		}
		id.Subject = "changed by the caller"
	}
}

// TestCacheAgreesWithUncached runs one token through a cached and an
// uncached verifier as the clock moves: their answers must never differ.
func TestCacheAgreesWithUncached(t *testing.T) {
	f := getFixture()
	const skew = 30 * time.Second
	tests := []struct {
		name    string
		claims  map[string]any
		offsets []time.Duration
		want    []verify.Reason
		cached  bool // whether the token is cached after the first Verify
	}{
		{
			name:    "expires",
			claims:  claims(nil),
			offsets: []time.Duration{0, 15 * time.Minute, 15*time.Minute + skew - time.Second, 15*time.Minute + skew, time.Hour},
			want:    []verify.Reason{"", "", "", verify.ReasonExpired, verify.ReasonExpired},
			cached:  true,
		},
		{
			name:    "nbf within the skew is not cached",
			claims:  claims(map[string]any{"nbf": now.Add(10 * time.Second).Unix()}),
			offsets: []time.Duration{0, 0, 10 * time.Second},
			want:    []verify.Reason{"", "", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.New(now)
			src := verify.NewStaticSource(f.set)
			cached := newCachedVerifier(t, src, clk, 100, skew)
			plain := newCachedVerifier(t, src, clk, 0, skew)
			tok := hs256(f.secret, header(map[string]any{"alg": "HS256", "kid": "hs"}), tt.claims)
			for i, off := range tt.offsets {
				clk.Advance(off - clk.Now().Sub(now))
				_, errC := cached.Verify(context.Background(), tok)
				_, errP := plain.Verify(context.Background(), tok)
				if got, gotP := verify.ReasonOf(errC), verify.ReasonOf(errP); got != tt.want[i] || gotP != tt.want[i] {
					t.Errorf("Verify at now+%v: cached %q (%v), uncached %q (%v), want %q", off, got, errC, gotP, errP, tt.want[i])
				}
				if i == 0 && (cached.CacheLen() == 1) != tt.cached {
					t.Errorf("CacheLen after the first Verify = %d, want cached %v", cached.CacheLen(), tt.cached)
				}
			}
		})
	}
}

func TestCacheKeyLeavesSource(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Now = clock
	srv := newJWKSServer(t, ks)
	clk := clocktest.New(now)
	s := newManualRemote(t, srv, clk, verify.RemoteOptions{})
	mustRefresh(t, s)
	v := newCachedVerifier(t, s, clk, 100, 0)
	ctx := context.Background()
	tok := ks.Token(t, "user-1")
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("Verify = %v, want nil", err)
	}

	// A refresh that changes nothing keeps the cache entry valid.
	mustRefresh(t, s)
	if _, err := v.Verify(ctx, tok); err != nil || v.CacheLen() != 1 {
		t.Fatalf("Verify after an idle refresh = %v with %d cached, want nil with 1", err, v.CacheLen())
	}

	// test-1 is replaced by another key under the same kid.
	forger := verifytest.NewKeySet(t)
	srv.serve(http.StatusOK, forger.JWKS(), "max-age=60")
	mustRefresh(t, s)
	if _, err := v.Verify(ctx, tok); verify.ReasonOf(err) != verify.ReasonSignature {
		t.Errorf("Verify after the key was replaced = %v, want reason %q", err, verify.ReasonSignature)
	}

	// test-1 leaves the set.
	srv.serve(http.StatusOK, ks.JWKS(), "max-age=60")
	mustRefresh(t, s)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("Verify with the key back = %v, want nil", err)
	}
	ks.Rotate(t)
	set := ks.PublicSet()
	old, _ := set.LookupKeyID("test-1")
	_ = set.RemoveKey(old)
	srv.serve(http.StatusOK, mustJSON(set), "max-age=60")
	mustRefresh(t, s)
	if _, err := v.Verify(ctx, tok); verify.ReasonOf(err) != verify.ReasonUnknownKey {
		t.Errorf("Verify after the key left the set = %v, want reason %q", err, verify.ReasonUnknownKey)
	}
}

func TestCacheForeignSource(t *testing.T) {
	f := getFixture()
	clk := clocktest.New(now)
	set := jwk.NewSet()
	k, _ := f.set.LookupKeyID("test-1")
	_ = set.AddKey(k)
	src := &swappableSource{set: set}
	v := newCachedVerifier(t, src, clk, 100, 0)
	tok := f.ks.Token(t, "user-1")
	for i := range 2 {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatalf("Verify #%d = %v, want nil", i, err)
		}
	}
	src.swap(jwk.NewSet())
	if _, err := v.Verify(context.Background(), tok); verify.ReasonOf(err) != verify.ReasonUnknownKey {
		t.Errorf("Verify after the foreign source dropped the key = %v, want reason %q", err, verify.ReasonUnknownKey)
	}
}

// swappableSource is a foreign KeySource whose set can change.
type swappableSource struct {
	mu  sync.Mutex
	set jwk.Set
}

func (s *swappableSource) swap(set jwk.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = set
}

func (s *swappableSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return foreignSource{set: s.set}.Key(ctx, kid)
}

// hsTokens returns n distinct valid HS256 tokens, cheap to make.
func hsTokens(n int) []string {
	f := getFixture()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = hs256(f.secret, header(map[string]any{"alg": "HS256", "kid": "hs"}), claims(map[string]any{"jti": fmt.Sprint("token-", i)}))
	}
	return toks
}

func TestCacheBounded(t *testing.T) {
	f := getFixture()
	for _, size := range []int{1, 100, 1000, 5000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			v := newCachedVerifier(t, verify.NewStaticSource(f.set), clocktest.New(now), size, 0)
			for i, tok := range hsTokens(size + 100) {
				if _, err := v.Verify(context.Background(), tok); err != nil {
					t.Fatalf("Verify #%d = %v", i, err)
				}
			}
			if got := v.CacheLen(); got > size || got < size/2 {
				t.Errorf("CacheLen = %d, want at most %d (and not far below)", got, size)
			}
		})
	}
}

func TestCacheConcurrent(t *testing.T) {
	f := getFixture()
	clk := clocktest.New(now)
	v := newCachedVerifier(t, verify.NewStaticSource(f.set), clk, 16, 0)
	toks := hsTokens(64) // more than fit: constant eviction
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				tok := toks[(g*7+i)%len(toks)]
				id, err := v.Verify(context.Background(), tok)
				if err != nil || id.Subject != "user-1" {
					errs <- fmt.Errorf("Verify = %v, %v", id, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			clk.Advance(time.Millisecond)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewCacheSize(t *testing.T) {
	_, err := verify.New(verify.NewStaticSource(getFixture().set), verify.Config{Issuer: issuer, Audience: audience, CacheSize: -1})
	if err == nil {
		t.Error("New with CacheSize -1 = nil error, want one")
	}
}
