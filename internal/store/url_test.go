package store

import (
	"strings"
	"testing"
)

func TestDialectOf(t *testing.T) {
	tests := []struct{ url, want string }{
		{"postgres://db/issuer", Postgres},
		{"postgresql://db/issuer", Postgres},
		{"sqlite:./data/issuer.db", SQLite},
		{"sqlite:///tmp/x.db", SQLite},
		{"mysql://db", ""},
		{"", ""},
		{"Postgres://db", ""},
	}
	for _, tt := range tests {
		if got := DialectOf(tt.url); got != tt.want {
			t.Errorf("DialectOf(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
	// The message names every form the list accepts.
	for _, s := range urlSchemes {
		if !strings.Contains(URLSchemes, s.prefix) {
			t.Errorf("URLSchemes = %q, want it to name %s", URLSchemes, s.prefix)
		}
	}
}
