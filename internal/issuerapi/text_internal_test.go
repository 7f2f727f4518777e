package issuerapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/text"
)

// TestHTTPInputHitsTextCheck: a request's body, query and path each meet
// the one storage check (text.Check) before any handler acts on them, and
// the client gets its answer, naming the field, as a 400.
func TestHTTPInputHitsTextCheck(t *testing.T) {
	a := &API{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{MaxBodyBytes: 1 << 16}}
	mux := http.NewServeMux()
	handled := 0
	mux.HandleFunc("POST /v1/login", func(w http.ResponseWriter, r *http.Request) {
		var req loginRequest
		if err := a.decode(w, r, &req); err != nil {
			a.writeError(w, r, err)
			return
		}
		handled++
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/admin/users/{id}", func(w http.ResponseWriter, r *http.Request) {
		handled++
		w.WriteHeader(http.StatusNoContent)
	})
	h := problemMux{mux: mux, writeError: a.writeError}

	for _, tc := range []struct {
		source, method, target, body, field string
	}{
		{"body NUL", "POST", "/v1/login", `{"email":"a\u0000@example.com","password":"x"}`, "email"},
		{"query NUL", "GET", "/v1/admin/users/u1?email=%00", "", "email"},
		{"query invalid UTF-8", "GET", "/v1/admin/users/u1?type=%c3%28", "", "type"},
		{"query key", "GET", "/v1/admin/users/u1?%ff=1", "", "query"},
		{"path NUL", "GET", "/v1/admin/users/%00", "", "path"},
		{"path invalid UTF-8", "GET", "/v1/admin/users/%ff", "", "path"},
	} {
		t.Run(tc.source, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			before := handled
			h.ServeHTTP(w, r)
			var got struct {
				Code   string              `json:"code"`
				Errors []apperr.FieldError `json:"errors"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("%s %s = %d %s: %v", tc.method, tc.target, w.Code, w.Body, err)
			}
			want := apperr.As(text.Check(tc.field, "\x00"))
			if w.Code != http.StatusBadRequest || got.Code != want.Code || len(got.Errors) != 1 || got.Errors[0] != want.Fields[0] {
				t.Errorf("%s %s = %d %s, want 400 with %+v", tc.method, tc.target, w.Code, w.Body, want.Fields)
			}
			if handled != before {
				t.Errorf("%s %s reached the handler", tc.method, tc.target)
			}
		})
	}

	// The same routes take storable text.
	for _, r := range []*http.Request{
		httptest.NewRequest("POST", "/v1/login", strings.NewReader(`{"email":"ünï@example.com","password":"x"}`)),
		httptest.NewRequest("GET", "/v1/admin/users/u1?email=%C3%BC", nil),
	} {
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			t.Errorf("%s %s = %d %s, want 204", r.Method, r.URL, w.Code, w.Body)
		}
	}
}

// A query of more than maxQueryParams parameters is refused before it is
// parsed: 9,900 of them on every request held the issuer to 21 answers a
// second. As many as that pass on.
func TestQueryParamsBounded(t *testing.T) {
	a := &API{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	handled := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		handled++
		w.WriteHeader(http.StatusNoContent)
	})
	h := problemMux{mux: mux, writeError: a.writeError}
	query := func(n int) string {
		pairs := make([]string, n)
		for i := range pairs {
			pairs[i] = fmt.Sprintf("p%d=1", i)
		}
		return strings.Join(pairs, "&")
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{query(maxQueryParams), http.StatusNoContent},
		{query(maxQueryParams + 1), http.StatusBadRequest},
		{strings.Repeat("&", maxQueryParams), http.StatusBadRequest},
		{query(9900), http.StatusBadRequest},
	} {
		w := httptest.NewRecorder()
		before := handled
		h.ServeHTTP(w, httptest.NewRequest("GET", "/.well-known/jwks.json?"+tc.query, nil))
		if w.Code != tc.want {
			t.Errorf("%d bytes of query = %d %s, want %d", len(tc.query), w.Code, w.Body, tc.want)
		}
		if tc.want == http.StatusBadRequest && (handled != before || !strings.Contains(w.Body.String(), `"malformed_request"`)) {
			t.Errorf("%d bytes of query: handled %v, body %s; want malformed_request, not handled", len(tc.query), handled != before, w.Body)
		}
	}
}
