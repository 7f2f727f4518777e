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
		{"zone dropped", "10.1.2.3:80", []string{"2001:db8::1%<img src=x>"}, "2001:db8::1"},
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

// New refuses what would trust other peers than written: garbage, an
// empty entry (which could stand alone for a list that trusts nobody), and
// a prefix with host bits set ("10.0.0.1/0" was masked to every address).
func TestNewRejectsGarbage(t *testing.T) {
	for _, c := range []string{"10.0.0.0/33", "", " ", "10.0.0.1/0", "10.0.0.1/8", "::ffff:0:0/95", "nonsense"} {
		if _, err := New([]string{"192.0.2.1", c}); err == nil {
			t.Errorf("New(%q) = nil error, want error", c)
		}
	}
}

// An IPv4-mapped entry trusts the IPv4 peers it names: peers are compared
// unmapped, so it used to trust nobody.
func TestNewReadsMappedEntriesAsIPv4(t *testing.T) {
	r, err := New([]string{"::ffff:10.0.0.0/104", "::ffff:192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"10.1.2.3:80", "192.0.2.7:80", "[::ffff:10.1.2.3]:80"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		if !r.TrustedPeer(req) {
			t.Errorf("peer %s not trusted, want trusted", remote)
		}
	}
}

// Client counts an IPv6 client by its /64, an IPv4 one by its address.
func TestClient(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ remote, xff, want string }{
		{"203.0.113.9:1234", "", "203.0.113.9"},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:80", "", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::1]:80", "", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:80", "", "2001:db8:1:3::/64"},
		{"10.1.2.3:80", "2001:db8:9:9:1::5", "2001:db8:9:9::/64"},
		{"[::ffff:198.51.100.4]:80", "", "198.51.100.4"},
		{"10.1.2.3:80", "::ffff:198.51.100.4", "198.51.100.4"},
		{"not an address", "", ""},
		// Translated and tunnelled: the IPv4 address they stand for.
		{"10.1.2.3:80", "64:ff9b::198.51.100.7", "198.51.100.7"},
		{"10.1.2.3:80", "64:ff9b::203.0.113.9", "203.0.113.9"},
		{"10.1.2.3:80", "64:ff9b:1:c633:64:700::", "198.51.100.7"},
		{"10.1.2.3:80", "::ffff:0:198.51.100.8", "198.51.100.8"},
		{"10.1.2.3:80", "::198.51.100.9", "198.51.100.9"},
		{"10.1.2.3:80", "2002:c633:6401:1::1", "198.51.100.1"},
		{"10.1.2.3:80", "2002:c633:6401:ffff::1", "198.51.100.1"},
		{"10.1.2.3:80", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"},
		{"10.1.2.3:80", "2001:0:4136:e378:8000:63bf:3cff:fdd2", "195.0.2.45"},
		{"[::1]:80", "", "::/64"},
		// A zone is the sender's text: dropped.
		{"10.1.2.3:80", "2001:db8::1%<img src=x>", "2001:db8::/64"},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = tt.remote
		if tt.xff != "" {
			req.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := r.Client(req); got != tt.want {
			t.Errorf("Client(remote=%s, xff=%q) = %q, want %q", tt.remote, tt.xff, got, tt.want)
		}
	}
}
