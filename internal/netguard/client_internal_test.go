package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

// TestControlPlainHTTP checks what the tests over loopback cannot reach: a
// public address is dialled for https but not for plain http unless it is
// in the allow-list.
func TestControlPlainHTTP(t *testing.T) {
	g := New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	tests := []struct {
		network, address string
		plain            bool
		ok               bool
	}{
		{"tcp4", "93.184.215.14:443", false, true},
		{"tcp4", "93.184.215.14:80", true, false},
		{"tcp4", "10.1.2.3:80", true, true},
		{"tcp6", "[::ffff:10.1.2.3]:80", true, true},
		{"tcp6", "[2606:4700:4700::1111]:443", false, true},
		{"tcp6", "[fe80::1%eth0]:443", false, false},
		{"tcp4", "127.0.0.1:443", false, false},
		{"udp4", "93.184.215.14:53", false, false},
		{"tcp4", "not-an-address", false, false},
	}
	for _, tt := range tests {
		err := g.control(tt.network, tt.address, tt.plain)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("control(%s, %s, plain %v) = %v, want ok %v", tt.network, tt.address, tt.plain, err, tt.ok)
		}
	}
}
