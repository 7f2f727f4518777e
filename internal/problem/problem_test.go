package problem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name       string
		in         Problem
		wantStatus int
		want       Problem
	}{
		{
			name:       "defaults",
			in:         Problem{Status: http.StatusUnauthorized, Code: "invalid_credentials", Detail: "Wrong email or password."},
			wantStatus: http.StatusUnauthorized,
			want:       Problem{Type: "about:blank", Title: "Unauthorized", Status: 401, Code: "invalid_credentials", Detail: "Wrong email or password."},
		},
		{
			name:       "explicit type and title kept",
			in:         Problem{Type: "https://palisade.example/problems/rate-limited", Title: "Slow down", Status: 429, Code: "rate_limited"},
			wantStatus: http.StatusTooManyRequests,
			want:       Problem{Type: "https://palisade.example/problems/rate-limited", Title: "Slow down", Status: 429, Code: "rate_limited"},
		},
		{
			name: "field errors",
			in: Problem{Status: http.StatusBadRequest, Code: "validation_failed", Errors: []FieldError{
				{Field: "password", Code: "too_short", Message: "At least 12 characters."},
			}},
			wantStatus: http.StatusBadRequest,
			want: Problem{Type: "about:blank", Title: "Bad Request", Status: 400, Code: "validation_failed", Errors: []FieldError{
				{Field: "password", Code: "too_short", Message: "At least 12 characters."},
			}},
		},
		{
			name:       "zero status is a fault",
			in:         Problem{Code: "internal_error"},
			wantStatus: http.StatusInternalServerError,
			want:       Problem{Type: "about:blank", Title: "Internal Server Error", Status: 500, Code: "internal_error"},
		},
		{
			name:       "internal",
			in:         Internal(),
			wantStatus: http.StatusInternalServerError,
			want:       Problem{Type: "about:blank", Title: "Internal Server Error", Status: 500, Code: "internal_error", Detail: "An internal error occurred."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("Retry-After", "7")
			Write(rec, tt.in)

			if rec.Code != tt.wantStatus {
				t.Errorf("Write(%+v) status = %d, want %d", tt.in, rec.Code, tt.wantStatus)
			}
			for name, want := range map[string]string{
				"Content-Type":           "application/problem+json",
				"Cache-Control":          "no-store",
				"X-Content-Type-Options": "nosniff",
				"Retry-After":            "7",
			} {
				if got := rec.Header().Get(name); got != want {
					t.Errorf("Write(%+v) header %s = %q, want %q", tt.in, name, got, want)
				}
			}
			var got Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("Write(%+v) body %q is not JSON: %v", tt.in, rec.Body.String(), err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Write(%+v) body = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriteOmitsEmptyOptionalMembers(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, Problem{Status: http.StatusNotFound, Code: "not_found"})
	var members map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &members); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
	}
	for _, name := range []string{"detail", "errors"} {
		if _, ok := members[name]; ok {
			t.Errorf("Write(no %s) body has member %q: %s", name, name, rec.Body.String())
		}
	}
	for _, name := range []string{"type", "title", "status", "code"} {
		if _, ok := members[name]; !ok {
			t.Errorf("Write body lacks member %q: %s", name, rec.Body.String())
		}
	}
}
