package netguard

import "testing"

// TestParseIPv4 compares parseIPv4 with glibc's inet_aton(3), whose answers
// (taken with Python's socket.inet_aton) are the want column. The one
// deliberate difference: "0x" alone is 0, as in the WHATWG URL parser,
// where inet_aton refuses it; taking it as an address only refuses more.
func TestParseIPv4(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2130706433", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0X7F.0.0.1", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"012.0.0.1", "10.0.0.1"},
		{"3232235777", "192.168.1.1"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"134744072", "8.8.8.8"},
		{"8.8.2056", "8.8.8.8"},
		{"00000000000000000000000000177.1", "127.0.0.1"},
		{"0x00000000000000007f.1", "127.0.0.1"},
		{"1.2.3.256", ""},
		{"1.2.3.4.5", ""},
		{"256.1.1.1", ""},
		{"1.2.3.08", ""},
		{"4294967296", ""},
		{"1..1", ""},
		{"+1", ""},
		{"example", ""},
		{"0x", "0.0.0.0"}, // inet_aton: refused
	}
	for _, tt := range tests {
		a, ok := parseIPv4(tt.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("parseIPv4(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
