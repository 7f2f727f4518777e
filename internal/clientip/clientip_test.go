package clientip

import (
	"net/http/httptest"
	"testing"
)

func TestClientIP(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer ignores header", "203.0.113.9:1234", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.1.2.3:80", []string{"198.51.100.4"}, "198.51.100.4"},
		{"trusted chain, right-most untrusted", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.4, 10.9.9.9"}, "198.51.100.4"},
		{"spoofed left entries never win", "10.1.2.3:80", []string{"1.1.1.1", "198.51.100.4"}, "198.51.100.4"},
		{"bare address trusted", "192.0.2.7:80", []string{"198.51.100.5"}, "198.51.100.5"},
		{"all trusted falls back to left-most trusted", "10.1.2.3:80", []string{"10.2.2.2"}, "10.2.2.2"},
		{"garbage entry stops the walk", "10.1.2.3:80", []string{"198.51.100.4, nonsense"}, "10.1.2.3"},
		{"no header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"ipv4-mapped ipv6 peer", "[::ffff:10.1.2.3]:80", []string{"198.51.100.4"}, "198.51.100.4"},
		{"ipv6 untrusted", "[2001:db8::1]:80", []string{"198.51.100.4"}, "2001:db8::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := r.String(req); got != tt.want {
				t.Errorf("ClientIP(remote=%s, xff=%q) = %s, want %s", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
}

func TestNewRejectsGarbage(t *testing.T) {
	if _, err := New([]string{"10.0.0.0/33"}); err == nil {
		t.Error("New(10.0.0.0/33) = nil error, want error")
	}
}
