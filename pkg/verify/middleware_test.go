package verify_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/palisade-auth/palisade/pkg/verify"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    string
		wantOK  bool
	}{
		{"none", nil, "", false},
		{"bearer", []string{"Bearer abc.def.ghi"}, "abc.def.ghi", true},
		{"lowercase scheme", []string{"bearer abc"}, "abc", true},
		{"uppercase scheme", []string{"BEARER abc"}, "abc", true},
		{"extra spaces", []string{"  Bearer   abc  "}, "abc", true},
		{"basic", []string{"Basic dXNlcjpwYXNz"}, "", false},
		{"scheme only", []string{"Bearer"}, "", false},
		{"scheme and space", []string{"Bearer "}, "", false},
		{"two tokens", []string{"Bearer abc def"}, "", false},
		{"tab inside", []string{"Bearer abc\tdef"}, "", false},
		{"two headers", []string{"Bearer abc", "Bearer abc"}, "", false},
		{"empty header", []string{""}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, ok := verify.BearerToken(r)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("BearerToken(%q) = %q, %v, want %q, %v", tt.headers, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	f := getFixture()
	v := newVerifier(t, verify.Config{})
	valid := f.ks.Token(t, "user-1")
	tests := []struct {
		name       string
		auth       string
		opts       []verify.MiddlewareOption
		wantStatus int
		wantReason verify.Reason
	}{
		{"missing", "", nil, http.StatusUnauthorized, verify.ReasonMissing},
		{"other scheme", "Basic dXNlcjpwYXNz", nil, http.StatusUnauthorized, verify.ReasonMissing},
		{"garbage", "Bearer garbage", nil, http.StatusUnauthorized, verify.ReasonMalformed},
		{"forged", "Bearer " + f.forger.Token(t, "user-1"), nil, http.StatusUnauthorized, verify.ReasonSignature},
		{"valid", "Bearer " + valid, nil, http.StatusOK, ""},
		{"valid lowercase scheme", "bearer " + valid, nil, http.StatusOK, ""},
		{"token func", "", []verify.MiddlewareOption{verify.WithTokenFunc(func(r *http.Request) (string, bool) {
			c, err := r.Cookie("access_token")
			if err != nil {
				return "", false
			}
			return c.Value, true
		})}, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotReason verify.Reason
			rejected := false
			opts := []verify.MiddlewareOption{verify.OnReject(func(r *http.Request, err error) {
				rejected = true
				gotReason = verify.ReasonOf(err)
			})}
			opts = append(opts, tt.opts...)
			var seen *verify.Identity
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen, _ = verify.FromContext(r.Context())
				w.WriteHeader(http.StatusOK)
			})
			h := verify.Middleware(v, opts...)(next)
			r := httptest.NewRequest(http.MethodGet, "/resource", nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			r.AddCookie(&http.Cookie{Name: "access_token", Value: valid})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", w.Code, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				if seen == nil || seen.Subject != "user-1" {
					t.Errorf("next saw identity %+v, want subject user-1", seen)
				}
				if rejected {
					t.Errorf("OnReject called for a valid token")
				}
				return
			}
			if seen != nil {
				t.Errorf("next handler ran for a refused token")
			}
			if gotReason != tt.wantReason {
				t.Errorf("OnReject reason = %q, want %q", gotReason, tt.wantReason)
			}
			checkUnauthorized(t, w)
		})
	}
}

func TestWriteUnauthorized(t *testing.T) {
	w := httptest.NewRecorder()
	verify.WriteUnauthorized(w)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401", w.Code)
	}
	checkUnauthorized(t, w)
}

func checkUnauthorized(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Type":     "application/problem+json",
		"Cache-Control":    "no-store",
		"WWW-Authenticate": `Bearer error="invalid_token"`,
	} {
		if got := w.Header().Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	want := map[string]any{
		"type": "about:blank", "title": "Unauthorized", "status": float64(401),
		"code": "invalid_token", "detail": "The access token is missing or invalid.",
	}
	if len(body) != len(want) {
		t.Errorf("body = %v, want %v", body, want)
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body[%s] = %v, want %v", k, body[k], v)
		}
	}
}
