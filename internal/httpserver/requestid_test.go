package httpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestRequestID(t *testing.T) {
	longest := strings.Repeat("a", 128)
	tests := []struct {
		name     string
		incoming []string // nil: no header at all
		wantEcho bool
	}{
		{name: "absent", incoming: nil},
		{name: "valid uuid echoed", incoming: []string{"0190b3a4-7c1e-7d2a-9f00-1234567890ab"}, wantEcho: true},
		{name: "all allowed characters echoed", incoming: []string{"Az09._:-"}, wantEcho: true},
		{name: "128 characters echoed", incoming: []string{longest}, wantEcho: true},
		{name: "too long replaced", incoming: []string{longest + "a"}},
		{name: "empty replaced", incoming: []string{""}},
		{name: "space replaced", incoming: []string{"abc def"}},
		{name: "slash replaced", incoming: []string{"abc/def"}},
		{name: "quote replaced", incoming: []string{`abc"def`}},
		{name: "non-ascii replaced", incoming: []string{"abcé"}},
		{name: "log injection replaced", incoming: []string{"abc\\n{\"msg\":\"forged\"}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inHandler, inContext, forwarded string
			h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inHandler = w.Header().Get(HeaderRequestID)
				inContext = RequestIDFromContext(r.Context())
				forwarded = r.Header.Get(HeaderRequestID)
			}))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.incoming != nil {
				req.Header[HeaderRequestID] = tt.incoming
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			got := rec.Header().Get(HeaderRequestID)
			if tt.wantEcho {
				if got != tt.incoming[0] {
					t.Errorf("RequestID(%q) response id = %q, want it echoed", tt.incoming, got)
				}
			} else {
				u, err := uuid.Parse(got)
				if err != nil || u.Version() != 7 {
					t.Errorf("RequestID(%q) response id = %q, want a fresh UUIDv7 (parse error %v)", tt.incoming, got, err)
				}
			}
			if inHandler != got {
				t.Errorf("RequestID(%q) header seen by next = %q, want %q set before next runs", tt.incoming, inHandler, got)
			}
			if inContext != got {
				t.Errorf("RequestIDFromContext = %q, want %q", inContext, got)
			}
			if forwarded != got {
				t.Errorf("RequestID(%q) request header seen by next = %q, want %q", tt.incoming, forwarded, got)
			}
		})
	}
}

func TestRequestIDGeneratedIDsDiffer(t *testing.T) {
	h := RequestID(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	seen := map[string]bool{}
	for range 100 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		id := rec.Header().Get(HeaderRequestID)
		if seen[id] {
			t.Fatalf("RequestID generated %q twice", id)
		}
		seen[id] = true
	}
}

func TestRequestIDFromContextWithoutMiddleware(t *testing.T) {
	if got := RequestIDFromContext(httptest.NewRequest(http.MethodGet, "/", nil).Context()); got != "" {
		t.Errorf("RequestIDFromContext(plain context) = %q, want \"\"", got)
	}
}
