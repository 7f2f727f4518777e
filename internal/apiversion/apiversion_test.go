package apiversion

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Deprecation
		wantErr bool
	}{
		{"v1:deprecated=2026-11-01", Deprecation{Version: "v1", Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, false},
		{"v1:deprecated=2026-11-01,sunset=2027-06-30T12:00:00Z,successor=https://auth.example.com/v2/", Deprecation{
			Version: "v1", Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Sunset: time.Date(2027, 6, 30, 12, 0, 0, 0, time.UTC),
			Successor: "https://auth.example.com/v2/"}, false},
		{"v1", Deprecation{}, true},
		{"1:deprecated=2026-11-01", Deprecation{}, true},
		{"v1:sunset=2027-06-30", Deprecation{}, true},
		{"v1:deprecated=yesterday", Deprecation{}, true},
		{"v1:deprecated=2026-11-01,sunset=2026-01-01", Deprecation{}, true},
		{"v1:deprecated=2026-11-01,successor=/v2", Deprecation{}, true},
		{"v1:deprecated=2026-11-01,successor=https://x/\"><", Deprecation{}, true},
		{"v1:deprecated=2026-11-01,color=red", Deprecation{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	d, err := Parse("v1:deprecated=2026-11-01,sunset=2027-06-30,successor=https://auth.example.com/v2/")
	if err != nil {
		t.Fatal(err)
	}
	h := Middleware([]Deprecation{d}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	tests := []struct {
		path                    string
		deprecation, sunset, ln string
	}{
		{"/v1/me", "@1793491200", "Wed, 30 Jun 2027 00:00:00 GMT", `<https://auth.example.com/v2/>; rel="successor-version"`},
		{"/v2/me", "", "", ""},
		{"/v1", "", "", ""},
		{"/health", "", "", ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("GET %s: status %d, want the handler's", tt.path, rec.Code)
		}
		for name, want := range map[string]string{"Deprecation": tt.deprecation, "Sunset": tt.sunset, "Link": tt.ln} {
			if got := rec.Header().Get(name); got != want {
				t.Errorf("GET %s: %s = %q, want %q", tt.path, name, got, want)
			}
		}
	}
}
