package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// The app's answer goes out with the headers it set: one without a
// Content-Type gets none (net/http guessed text/html for markup, which an
// app serving uploads with nosniff had left out on purpose), and
// X-Request-Id is the verifier's alone (the app's was added beside it).
// On both forwarding paths: a GET without a body, and a POST.
func TestProxyAnswerHeadersAreTheApps(t *testing.T) {
	const page = "<html><script>alert(1)</script>"
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = nil // send none
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Request-Id", "app-chosen-id")
		if r.URL.Path == "/typed" {
			w.Header().Set("Content-Type", "image/png")
		}
		io.WriteString(w, page)
	}))
	t.Cleanup(app.Close)
	ks := verifytest.NewKeySet(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Algorithms: []string{"RS256"}, ClockSkew: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(app.URL)
	srv := httptest.NewServer(httpserver.RequestID(proxy.NewProxy(v, u, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler)})))
	t.Cleanup(srv.Close)
	tok := ks.Token(t, "user-1")
	for _, tc := range []struct{ method, path, body, wantType string }{
		{http.MethodGet, "/upload", "", ""},
		{http.MethodPost, "/upload", "x=1", ""},
		{http.MethodGet, "/typed", "", "image/png"},
		{http.MethodPost, "/typed", "x=1", "image/png"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", "client-id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		what := tc.method + " " + tc.path
		if resp.StatusCode != http.StatusOK || string(body) != page {
			t.Fatalf("%s = %d %q, want the app's 200", what, resp.StatusCode, body)
		}
		if got := resp.Header.Values("Content-Type"); tc.wantType == "" && len(got) != 0 || tc.wantType != "" && (len(got) != 1 || got[0] != tc.wantType) {
			t.Errorf("%s: Content-Type = %q, want %q as the app sent it", what, got, tc.wantType)
		}
		if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-id" {
			t.Errorf("%s: X-Request-Id = %q, want the verifier's own alone", what, got)
		}
	}
}
