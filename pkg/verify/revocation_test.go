package verify_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// newFeed serves a revocation feed on the fake clock.
func newFeed(t *testing.T, clk *clocktest.Clock) (*verifytest.RevocationFeed, *httptest.Server) {
	t.Helper()
	feed := &verifytest.RevocationFeed{Now: clk.Now}
	srv := httptest.NewServer(feed)
	t.Cleanup(srv.Close)
	return feed, srv
}

// newManualRevocations returns a RevocationSource without its polling
// loop, on the fake clock.
func newManualRevocations(t *testing.T, url string, clk *clocktest.Clock, opts verify.RevocationOptions) *verify.RevocationSource {
	t.Helper()
	opts.Now = clk.Now
	s, err := verify.NewManualRevocationSource(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("NewRevocationSource = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustRefreshRevocations(t *testing.T, s *verify.RevocationSource) {
	t.Helper()
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
}

// lastRequest returns the feed's last request.
func lastRequest(t *testing.T, feed *verifytest.RevocationFeed) verifytest.RevocationRequest {
	t.Helper()
	reqs := feed.Requests()
	if len(reqs) == 0 {
		t.Fatal("the feed saw no request")
	}
	return reqs[len(reqs)-1]
}

func TestRevocationSourceDeltas(t *testing.T) {
	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	until := now.Add(16 * time.Minute)
	feed.RevokeSession("s1", until)
	feed.RevokeKey("k1", until)
	s := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{})

	if s.Ready() || s.Len() != 0 || !s.Stale() {
		t.Fatalf("before the first refresh: Ready, Len, Stale = %v, %d, %v, want false, 0, true", s.Ready(), s.Len(), s.Stale())
	}
	mustRefreshRevocations(t, s)
	if r := lastRequest(t, feed); r.After != "" || r.IfNoneMatch != "" {
		t.Errorf("first request = %+v, want the whole list, unconditional", r)
	}
	if !s.Ready() || s.Len() != 2 || !s.SessionRevoked("s1") || !s.KeyRevoked("k1") || s.SessionRevoked("s2") {
		t.Fatalf("after the first refresh: Ready %v, Len %d, s1 %v, k1 %v, s2 %v, want true, 2, true, true, false",
			s.Ready(), s.Len(), s.SessionRevoked("s1"), s.KeyRevoked("k1"), s.SessionRevoked("s2"))
	}

	clk.Advance(5 * time.Second)
	mustRefreshRevocations(t, s)
	if r := lastRequest(t, feed); r.After == "" || r.IfNoneMatch == "" || r.Status != http.StatusNotModified {
		t.Errorf("idle refresh = %+v, want a conditional delta answered 304", r)
	}
	if st, ok := s.Staleness(); !ok || st != 0 || s.Len() != 2 {
		t.Errorf("after a 304: Staleness, Len = %v %v, %d, want 0 true, 2", st, ok, s.Len())
	}

	feed.RevokeSession("s2", until)
	mustRefreshRevocations(t, s)
	if r := lastRequest(t, feed); r.After == "" || r.Status != http.StatusOK {
		t.Errorf("refresh with a change = %+v, want a delta answered 200", r)
	}
	if s.Len() != 3 || !s.SessionRevoked("s1") || !s.SessionRevoked("s2") {
		t.Errorf("after a delta: Len %d, s1 %v, s2 %v, want 3, true, true", s.Len(), s.SessionRevoked("s1"), s.SessionRevoked("s2"))
	}

	// A cursor the feed no longer knows: the whole list at once.
	feed.ForgetCursors()
	feed.RevokeSession("s3", until)
	mustRefreshRevocations(t, s)
	reqs := feed.Requests()
	if got := reqs[len(reqs)-2:]; got[0].Status != http.StatusGone || got[1].After != "" || got[1].Status != http.StatusOK {
		t.Errorf("refresh after the cursors were forgotten = %+v, want 410 then the whole list", got)
	}
	if s.Len() != 4 || !s.SessionRevoked("s3") {
		t.Errorf("after the whole list again: Len %d, s3 %v, want 4, true", s.Len(), s.SessionRevoked("s3"))
	}
}

func TestRevocationSourceErrorsKeepList(t *testing.T) {
	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	feed.RevokeSession("s1", now.Add(time.Hour))
	var outcomes []error
	s := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{
		MaxStaleness: time.Minute, OnRefresh: func(err error) { outcomes = append(outcomes, err) },
	})
	mustRefreshRevocations(t, s)

	tests := []struct {
		name  string
		serve http.Handler
	}{
		{"status 500", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", 500) })},
		{"not json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) })},
		{"no until", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"sessions":[{"sid":"x"}],"keys":[],"cursor":"z"}`))
		})},
		{"no sid", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"sessions":[{"until":"2030-01-01T00:00:00Z"}],"keys":[],"cursor":"z"}`))
		})},
		{"cursor refused, then the whole list", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Config.Handler = tt.serve
			clk.Advance(10 * time.Second)
			if err := s.Refresh(context.Background()); err == nil {
				t.Fatalf("Refresh = nil, want an error")
			}
			if !s.SessionRevoked("s1") || s.Len() != 1 {
				t.Errorf("after a failed refresh: s1 %v, Len %d, want true, 1 (the last good list)", s.SessionRevoked("s1"), s.Len())
			}
		})
	}
	if st, ok := s.Staleness(); !ok || st != 50*time.Second || s.Stale() {
		t.Errorf("Staleness, Stale after 50s of failures = %v %v, %v, want 50s true, false", st, ok, s.Stale())
	}
	clk.Advance(11 * time.Second)
	if !s.Stale() {
		t.Errorf("Stale after 61s of failures = false, want true")
	}
	if len(outcomes) != 6 || outcomes[0] != nil || outcomes[5] == nil {
		t.Errorf("OnRefresh saw %v, want nil then 5 errors", outcomes)
	}
	srv.Config.Handler = feed
	mustRefreshRevocations(t, s)
	if s.Stale() || !s.SessionRevoked("s1") {
		t.Errorf("after recovery: Stale %v, s1 %v, want false, true", s.Stale(), s.SessionRevoked("s1"))
	}
}

// An answer that is not a revocation list is a failed refresh, not an
// empty list: JSON decoding alone took null, {} or another document (a
// --revocation-url naming the discovery document) for one, and a
// verifier, fail-closed or not, let every logged-out token through while
// it reported a fresh list. So is one that answers a refused cursor's
// whole-list read so.
func TestRevocationSourceRefusesWhatIsNoList(t *testing.T) {
	answers := map[string]string{
		"null":                `null`,
		"empty object":        `{}`,
		"discovery document":  `{"issuer":"http://localhost:8080","jwks_uri":"http://localhost:8080/.well-known/jwks.json"}`,
		"no cursor":           `{"sessions":[],"keys":[]}`,
		"empty cursor":        `{"sessions":[],"keys":[],"cursor":""}`,
		"sessions null":       `{"sessions":null,"keys":[],"cursor":"c"}`,
		"no keys":             `{"sessions":[],"cursor":"c"}`,
		"sessions not a list": `{"sessions":{},"keys":[],"cursor":"c"}`,
	}
	for name, body := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
			defer srv.Close()
			s := newManualRevocations(t, srv.URL, clocktest.New(now), verify.RevocationOptions{MaxStaleness: time.Minute})
			if err := s.Refresh(context.Background()); err == nil {
				t.Errorf("Refresh of %s = nil, want an error", body)
			}
			if _, ok := s.Staleness(); ok {
				t.Errorf("after %s the source reports a list", body)
			}
		})
	}

	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	feed.RevokeSession("s1", now.Add(time.Hour))
	s := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{MaxStaleness: time.Minute})
	mustRefreshRevocations(t, s)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("after") {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`null`))
	})
	clk.Advance(61 * time.Second)
	if err := s.Refresh(context.Background()); err == nil {
		t.Fatalf("Refresh with the cursor refused and the whole list null = nil, want an error")
	}
	if !s.SessionRevoked("s1") || !s.Stale() {
		t.Errorf("after it: s1 revoked %v, stale %v; want the last good list, stale a minute on", s.SessionRevoked("s1"), s.Stale())
	}
}

func TestRevocationSourceExpiry(t *testing.T) {
	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	feed.RevokeSession("early", now.Add(time.Minute))
	feed.RevokeSession("late", now.Add(10*time.Minute))
	feed.RevokeKey("k", now.Add(2*time.Minute))
	feed.RevokeSession("past", now.Add(-time.Second))
	s := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{MaxStaleness: time.Hour})
	mustRefreshRevocations(t, s)
	if s.Len() != 3 || s.SessionRevoked("past") {
		t.Fatalf("Len, past = %d, %v, want 3, false", s.Len(), s.SessionRevoked("past"))
	}
	steps := []struct {
		at         time.Duration
		early, key bool
		len        int
	}{
		{59 * time.Second, true, true, 3},
		{time.Minute, false, true, 2},
		{2 * time.Minute, false, false, 1},
	}
	for _, st := range steps {
		clk.Set(now.Add(st.at))
		mustRefreshRevocations(t, s) // 304: pruned all the same
		if s.SessionRevoked("early") != st.early || s.KeyRevoked("k") != st.key || s.Len() != st.len || !s.SessionRevoked("late") {
			t.Errorf("at now+%v: early %v, k %v, late %v, Len %d, want %v, %v, true, %d",
				st.at, s.SessionRevoked("early"), s.KeyRevoked("k"), s.SessionRevoked("late"), s.Len(), st.early, st.key, st.len)
		}
	}
}

func TestRevocationSourceCap(t *testing.T) {
	clk := clocktest.New(now)
	feed, srv := newFeed(t, clk)
	until := now.Add(time.Minute)
	feed.RevokeSession("s1", until)
	feed.RevokeSession("s2", until)
	feed.RevokeSession("s3", until)
	s := newManualRevocations(t, srv.URL, clk, verify.RevocationOptions{MaxEntries: 2})
	if err := s.Refresh(context.Background()); !errors.Is(err, verify.ErrRevocationsOverflow) {
		t.Fatalf("Refresh of 3 entries with MaxEntries 2 = %v, want ErrRevocationsOverflow", err)
	}
	if s.Ready() {
		t.Fatalf("Ready after an overflow = true, want false: nothing was applied")
	}

	// Two expire; the list fits and loads.
	clk.Advance(2 * time.Minute)
	feed.RevokeSession("s4", now.Add(time.Hour))
	mustRefreshRevocations(t, s)
	if !s.Ready() || s.Len() != 1 || !s.SessionRevoked("s4") {
		t.Fatalf("after the expiry: Ready %v, Len %d, s4 %v, want true, 1, true", s.Ready(), s.Len(), s.SessionRevoked("s4"))
	}

	// A delta that would overflow is not applied either: the last list
	// stays, whole, and grows stale.
	loaded := s.LoadedAt()
	feed.RevokeSession("s5", now.Add(time.Hour))
	feed.RevokeSession("s6", now.Add(time.Hour))
	clk.Advance(time.Second)
	if err := s.Refresh(context.Background()); !errors.Is(err, verify.ErrRevocationsOverflow) {
		t.Fatalf("Refresh of a delta past MaxEntries = %v, want ErrRevocationsOverflow", err)
	}
	if s.Len() != 1 || s.SessionRevoked("s5") || !s.LoadedAt().Equal(loaded) {
		t.Errorf("after the overflow: Len %d, s5 %v, LoadedAt %v, want 1, false, %v", s.Len(), s.SessionRevoked("s5"), s.LoadedAt(), loaded)
	}
}

func TestNewRevocationSource(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts verify.RevocationOptions
		ok   bool
	}{
		{"defaults", "http://issuer/v1/revocations", verify.RevocationOptions{}, true},
		{"relative url", "/v1/revocations", verify.RevocationOptions{}, false},
		{"other scheme", "ftp://issuer/v1/revocations", verify.RevocationOptions{}, false},
		{"negative poll", "http://issuer/", verify.RevocationOptions{PollInterval: -1}, false},
		{"negative staleness", "http://issuer/", verify.RevocationOptions{MaxStaleness: -1}, false},
		{"negative entries", "http://issuer/", verify.RevocationOptions{MaxEntries: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := verify.NewRevocationSource(context.Background(), tt.url, tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("NewRevocationSource(%q, %+v) = %v, want ok %v", tt.url, tt.opts, err, tt.ok)
			}
			if s != nil {
				_ = s.Close()
			}
		})
	}
}

// TestRevocationSourcePolls runs the real loop: it asks for the list on
// its own, and Close stops it.
func TestRevocationSourcePolls(t *testing.T) {
	feed := &verifytest.RevocationFeed{}
	srv := httptest.NewServer(feed)
	defer srv.Close()
	feed.RevokeSession("s1", time.Now().Add(time.Hour))
	s, err := verify.NewRevocationSource(context.Background(), srv.URL, verify.RevocationOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(feed.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the feed saw %d requests within 10s, want at least 2", len(feed.Requests()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = s.Close()
	if !s.SessionRevoked("s1") {
		t.Errorf("SessionRevoked(s1) = false after polling, want true")
	}
}
