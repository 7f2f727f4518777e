package verify_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// revokingVerifier verifies against src with revs on clk.
func revokingVerifier(t testing.TB, src verify.KeySource, revs *verify.RevocationSource, clk *clocktest.Clock, cacheSize int) *verify.Verifier {
	t.Helper()
	v, err := verify.New(src, verify.Config{
		Issuer: issuer, Audience: audience, Now: clk.Now, CacheSize: cacheSize, Revocations: revs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sessionToken(t testing.TB, ks *verifytest.KeySet, sid string) string {
	t.Helper()
	return ks.Mint(t, verifytest.Claims{Subject: "user-" + sid, SessionID: sid})
}

func TestVerifierSessionRevoked(t *testing.T) {
	f := getFixture()
	for _, size := range []int{0, 100} {
		t.Run(fmt.Sprintf("cache %d", size), func(t *testing.T) {
			clk := clocktest.New(now)
			feed, srv := newFeed(t, clk)
			revs := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{})
			mustRefreshRevocations(t, revs)
			v := revokingVerifier(t, verify.NewStaticSource(f.set), revs, clk, size)
			ctx := context.Background()
			a, b := sessionToken(t, f.ks, "a"), sessionToken(t, f.ks, "b")
			for _, tok := range []string{a, b, a, b} { // the second round from the cache
				if _, err := v.Verify(ctx, tok); err != nil {
					t.Fatalf("Verify before any revocation = %v, want nil", err)
				}
			}

			feed.RevokeSession("a", now.Add(16*time.Minute))
			mustRefreshRevocations(t, revs)
			for range 2 {
				_, err := v.Verify(ctx, a)
				if got := verify.ReasonOf(err); got != verify.ReasonSessionRevoked {
					t.Errorf("Verify(sid a) after its revocation = %v, want reason %q", err, verify.ReasonSessionRevoked)
				}
				if _, err := v.Verify(ctx, b); err != nil {
					t.Errorf("Verify(sid b) after a's revocation = %v, want nil", err)
				}
			}
			if size > 0 && v.CacheLen() != 1 {
				t.Errorf("CacheLen after a's revocation = %d, want 1 (a's entry dropped)", v.CacheLen())
			}
			// A token without a sid has nothing to be revoked by.
			if _, err := v.Verify(ctx, f.ks.Mint(t, verifytest.Claims{Subject: "no-sid"})); err != nil {
				t.Errorf("Verify(no sid) = %v, want nil", err)
			}
		})
	}
}

func TestVerifierKeyRevoked(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Now = clock
	old := ks.Token(t, "user-1") // test-1
	ks.Rotate(t)
	cur := ks.Token(t, "user-1") // test-2
	jwks := newJWKSServer(t, ks)
	clk := clocktest.New(now)
	keys := newManualRemote(t, jwks, clk, verify.RemoteOptions{})
	mustRefresh(t, keys)
	feed, srv := newFeed(t, clk)
	revs := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{})
	mustRefreshRevocations(t, revs)
	v := revokingVerifier(t, keys, revs, clk, 100)
	ctx := context.Background()
	for _, tok := range []string{old, cur, old, cur} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("Verify before the revocation = %v, want nil", err)
		}
	}

	feed.RevokeKey("test-1", now.Add(16*time.Minute))
	mustRefreshRevocations(t, revs)
	fetches := jwks.fetches.Load()
	for range 2 {
		if _, err := v.Verify(ctx, old); verify.ReasonOf(err) != verify.ReasonKeyRevoked {
			t.Errorf("Verify(test-1 token) after the revocation = %v, want reason %q", err, verify.ReasonKeyRevoked)
		}
		if _, err := v.Verify(ctx, cur); err != nil {
			t.Errorf("Verify(test-2 token) after test-1's revocation = %v, want nil", err)
		}
	}
	if n := jwks.fetches.Load(); n != fetches {
		t.Errorf("JWK set fetches during the verifications = %d, want none", n-fetches)
	}
	// The key source dropped the key at once, and keeps it dropped while
	// the published set still holds it.
	if _, err := keys.Key(ctx, "test-1"); !errors.Is(err, verify.ErrUnknownKey) {
		t.Errorf("Key(test-1) after the revocation = %v, want ErrUnknownKey", err)
	}
	mustRefresh(t, keys)
	if _, err := keys.Key(ctx, "test-1"); !errors.Is(err, verify.ErrUnknownKey) {
		t.Errorf("Key(test-1) after a JWK set refresh still holding it = %v, want ErrUnknownKey", err)
	}
	if _, err := keys.Key(ctx, "test-2"); err != nil {
		t.Errorf("Key(test-2) = %v, want nil", err)
	}

	// A verifier built after the revocation drops the key from its source
	// at once too.
	keys2 := newManualRemote(t, jwks, clk, verify.RemoteOptions{})
	mustRefresh(t, keys2)
	revokingVerifier(t, verify.Sources(keys2), revs, clk, 0)
	if _, err := keys2.Key(ctx, "test-1"); !errors.Is(err, verify.ErrUnknownKey) {
		t.Errorf("Key(test-1) of a source registered after the revocation = %v, want ErrUnknownKey", err)
	}
}

func TestVerifierRevocationsStale(t *testing.T) {
	f := getFixture()
	tests := []struct {
		name       string
		failClosed bool
		// the reasons before the first list, when fresh, after 61s without
		// a refresh, and after a refresh again
		want [4]verify.Reason
	}{
		{"fail open", false, [4]verify.Reason{"", "", "", ""}},
		{"fail closed", true, [4]verify.Reason{verify.ReasonRevocationsStale, "", verify.ReasonRevocationsStale, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.New(now)
			feed, srv := newFeed(t, clk)
			revs := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{MaxStaleness: time.Minute, FailClosed: tt.failClosed})
			v := revokingVerifier(t, verify.NewStaticSource(f.set), revs, clk, 100)
			tok := sessionToken(t, f.ks, "a")
			ctx := context.Background()
			check := func(step int) {
				t.Helper()
				for _, what := range []string{"first", "again"} { // the second may come from the cache
					if _, err := v.Verify(ctx, tok); verify.ReasonOf(err) != tt.want[step] {
						t.Errorf("Verify #%d (%s) = %v, want reason %q", step, what, err, tt.want[step])
					}
				}
			}
			check(0)
			mustRefreshRevocations(t, revs)
			check(1)
			feed.Fail(http.StatusServiceUnavailable)
			clk.Advance(61 * time.Second)
			if err := revs.Refresh(ctx); err == nil {
				t.Fatal("Refresh from a failing feed = nil, want an error")
			}
			if !revs.Stale() {
				t.Errorf("Stale after 61s without a refresh = false, want true")
			}
			check(2)
			feed.Fail(0)
			mustRefreshRevocations(t, revs)
			check(3)
		})
	}
}

func TestMiddlewareRevoked(t *testing.T) {
	f := getFixture()
	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	feed.RevokeSession("gone", now.Add(time.Hour))
	revs := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{})
	mustRefreshRevocations(t, revs)
	v := revokingVerifier(t, verify.NewStaticSource(f.set), revs, clk, 100)
	var reason verify.Reason
	h := verify.Middleware(v, verify.OnReject(func(_ *http.Request, err error) { reason = verify.ReasonOf(err) }))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	tests := []struct {
		sid        string
		wantStatus int
		wantReason verify.Reason
	}{
		{"kept", http.StatusNoContent, ""},
		{"gone", http.StatusUnauthorized, verify.ReasonSessionRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.sid, func(t *testing.T) {
			reason = ""
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+sessionToken(t, f.ks, tt.sid))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus || reason != tt.wantReason {
				t.Errorf("Middleware(sid %s) = %d, reason %q, want %d, %q", tt.sid, w.Code, reason, tt.wantStatus, tt.wantReason)
			}
			if w.Code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("Middleware(sid %s) 401 without WWW-Authenticate", tt.sid)
			}
		})
	}
}

// TestFileSourceKeyRevoked: a file source drops a revoked key at once and
// keeps it dropped while the file still holds it; once a new file no
// longer holds the kid, it is forgotten.
func TestFileSourceKeyRevoked(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Rotate(t) // test-1 and test-2
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, ks.JWKS())
	keys, clk := newManualFile(t, path)
	wantPoll(t, keys, true, false)
	feed, srv := newFeed(t, clk)
	feed.RevokeKey("test-1", now.Add(time.Hour))
	revs := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{})
	revokingVerifier(t, keys, revs, clk, 0)
	wantKey(t, keys, "test-1", nil)

	mustRefreshRevocations(t, revs)
	wantKey(t, keys, "test-1", verify.ErrUnknownKey)
	wantKey(t, keys, "test-2", nil)

	// The same keys in another order: new content, test-1 still dropped.
	set := ks.PublicSet()
	k1, _ := set.LookupKeyID("test-1")
	_ = set.RemoveKey(k1)
	_ = set.AddKey(k1)
	writeFile(t, path, mustJSON(set))
	wantPoll(t, keys, true, false)
	wantKey(t, keys, "test-1", verify.ErrUnknownKey)
	wantKey(t, keys, "test-2", nil)
}
