package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// rejections returns verifier_requests_total{outcome="rejected"} by reason.
func rejections(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "verifier_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["outcome"] == proxy.OutcomeRejected {
				got[labels["reason"]] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}

// TestRevokedTokens: in both modes a token of a revoked session or key is
// refused with the 401 of any invalid token, the app is never reached, and
// the refusal is counted under its reason; another session passes.
func TestRevokedTokens(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	oldKid := ks.KeyID()
	oldKey := ks.Mint(t, verifytest.Claims{Subject: "u3", SessionID: "s3"})
	ks.Rotate(t)
	feed := &verifytest.RevocationFeed{}
	until := time.Now().Add(time.Hour)
	feed.RevokeSession("gone", until)
	feed.RevokeKey(oldKid, until)
	fsrv := httptest.NewServer(feed)
	defer fsrv.Close()
	revs, err := verify.NewRevocationSource(context.Background(), fsrv.URL, verify.RevocationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer revs.Close()
	if err := revs.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, CacheSize: 100, Revocations: revs})
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	u, _ := url.Parse(up.srv.URL)
	for _, mode := range []string{"proxy", "forward-auth"} {
		t.Run(mode, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			cfg := proxy.Config{Metrics: proxy.NewMetrics(reg, func() float64 { return 0 }), Logger: slog.New(slog.DiscardHandler)}
			var h http.Handler
			if mode == "proxy" {
				h = proxy.NewProxy(v, u, nil, cfg)
			} else {
				h = proxy.NewForwardAuth(v, cfg)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			hitsBefore := up.hits.Load()
			for _, tc := range []struct {
				name string
				tok  string
				want int
			}{
				{"kept", ks.Mint(t, verifytest.Claims{Subject: "u1", SessionID: "kept"}), http.StatusOK},
				{"revoked session", ks.Mint(t, verifytest.Claims{Subject: "u2", SessionID: "gone"}), http.StatusUnauthorized},
				{"revoked key", oldKey, http.StatusUnauthorized},
			} {
				resp := get(t, srv.URL+"/x", map[string]string{"Authorization": "Bearer " + tc.tok})
				if resp.StatusCode != tc.want {
					t.Errorf("%s %s: GET = %d, want %d", mode, tc.name, resp.StatusCode, tc.want)
				}
				if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", mode, tc.name)
				}
			}
			if mode == "proxy" {
				if n := up.hits.Load() - hitsBefore; n != 1 {
					t.Errorf("app reached %d times, want 1 (the kept session only)", n)
				}
			}
			got := rejections(t, reg)
			if got[string(verify.ReasonSessionRevoked)] != 1 || got[string(verify.ReasonKeyRevoked)] != 1 {
				t.Errorf("rejections by reason = %v, want session_revoked 1, key_revoked 1", got)
			}
		})
	}
}
