package netguard_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/palisade-auth/palisade/internal/netguard"
)

// names is what the test resolver knows; every other name does not exist.
var names = map[string][]string{
	"example.test": {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:1c02"},
	"loop.test":    {"127.0.0.1"},
	"loop6.test":   {"::1"},
	"meta.test":    {"169.254.169.254"},
	"mapped.test":  {"::ffff:10.1.1.1"},
	"mixed.test":   {"93.184.215.14", "10.0.0.5"},
	"svc.test":     {"10.0.0.5"},
}

func newGuard(t *testing.T, allow ...string) *netguard.Guard {
	t.Helper()
	cfg := netguard.Config{Resolver: startDNS(t, staticAnswers(names))}
	for _, a := range allow {
		cfg.Allow = append(cfg.Allow, netip.MustParsePrefix(a))
	}
	return netguard.New(cfg)
}

func TestCheckURLRefusesInternalAddresses(t *testing.T) {
	g := newGuard(t)
	for _, raw := range []string{
		// IPv4 loopback in every spelling.
		"https://127.0.0.1/",
		"https://127.0.0.1./",
		"https://2130706433/",   // decimal
		"https://017700000001/", // octal, one part
		"https://0177.0.0.1/",   // octal
		"https://0x7f.1/",       // hex, short form
		"https://0X7F.0.0.1/",   // upper case
		"https://0x7f000001/",   // hex, one part
		"https://127.1/",        // short form
		"https://127.0.1/",      // short form, three parts
		"https://127.0.0.1:8443/path?q=1",
		"https://127.255.255.254/",
		// IPv6 forms of loopback and unspecified.
		"https://[::1]/",
		"https://[0:0:0:0:0:0:0:1]/",
		"https://[::]/",
		"https://[::ffff:127.0.0.1]/", // IPv4-mapped
		"https://[::ffff:7f00:1]/",
		"https://[0:0:0:0:0:ffff:127.0.0.1]/",
		"https://[::127.0.0.1]/",        // IPv4-compatible
		"https://[::ffff:0:127.0.0.1]/", // IPv4-translated (SIIT)
		"https://[64:ff9b::127.0.0.1]/", // NAT64
		"https://[64:ff9b::7f00:1]/",
		"https://[64:ff9b::a9fe:a9fe]/", // NAT64 of the metadata address
		"https://[64:ff9b:1::a00:1]/",   // local-use NAT64
		"https://[2002:7f00:1::]/",      // 6to4 of 127.0.0.1
		"https://[2002:c0a8:101::1]/",   // 6to4 of 192.168.1.1
		"https://[2002:a9fe:a9fe::]/",   // 6to4 of 169.254.169.254
		// Unspecified, "this network", broadcast.
		"https://0.0.0.0/",
		"https://0/",
		"https://0.1.2.3/",
		"https://255.255.255.255/",
		"https://4294967295/",
		// Private, CGNAT, link-local and metadata endpoints.
		"https://10.0.0.1/",
		"https://012.0.0.1/", // octal 10.0.0.1
		"https://172.16.5.4/",
		"https://172.31.255.255/",
		"https://192.168.1.1/",
		"https://3232235777/", // 192.168.1.1
		"https://100.64.0.1/",
		"https://100.100.100.200/", // Alibaba Cloud metadata (CGNAT)
		"https://169.254.169.254/latest/meta-data/",
		"https://0xa9fea9fe/",
		"https://192.0.0.192/",     // Oracle Cloud metadata (IETF protocol assignments)
		"https://[fd00:ec2::254]/", // AWS metadata over IPv6 (ULA)
		"https://[fc00::1]/",
		"https://[fe80::1]/",
		"https://[fe80::1%25eth0]/",
		"https://[fec0::1]/",
		// Multicast, reserved, documentation, benchmarking, discard, Teredo.
		"https://224.0.0.1/",
		"https://239.255.255.250/",
		"https://[ff02::1]/",
		"https://240.0.0.1/",
		"https://192.0.2.1/",
		"https://198.51.100.7/",
		"https://203.0.113.9/",
		"https://198.18.0.1/",
		"https://192.88.99.1/",
		"https://[2001:db8::1]/",
		"https://[3fff::1]/",
		"https://[2001::1]/",
		"https://[100::1]/",
		"https://[5f00::1]/",
		// Names: localhost never, and names resolving to internal addresses.
		"https://localhost/",
		"https://LOCALHOST./",
		"https://api.localhost/",
		"https://loop.test/",
		"https://loop6.test/",
		"https://meta.test/",
		"https://mapped.test/",
		"https://mixed.test/", // every address is checked
	} {
		if err := g.CheckURL(context.Background(), raw); !errors.Is(err, netguard.ErrBlockedAddress) {
			t.Errorf("CheckURL(%q) = %v, want ErrBlockedAddress", raw, err)
		}
	}
}

func TestCheckURLRefusesInvalid(t *testing.T) {
	g := newGuard(t)
	for _, raw := range []string{
		"",
		"example.test/hook",
		"//example.test/hook",
		"ftp://example.test/",
		"javascript:alert(1)",
		"mailto:a@example.test",
		"https:example.test",
		"https:///hook",
		"https://user:pass@example.test/",
		"https://user@example.test/",
		"https://:@example.test/",
		"https://example.test:0/",
		"https://example.test:65536/",
		"https://example.test:http/",
		"https://exa mple.test/",
		"https://bücher.test/",
		"https://a..test/",
		"https://1.2.3.256/",       // numeric last label but not an address
		"https://1.2.3.4.5/",       // five parts
		"https://256.1.1.1/",       // first part over 255
		"https://1.2.3.08/",        // 08 is not octal
		"https://%31%32%37.0.0.1/", // net/url refuses escapes in a host
		"https://example.123/",
		"https://[::1/",
		"https://[not-an-ip]/",
		"https://[127.0.0.1]/",
	} {
		if err := g.CheckURL(context.Background(), raw); !errors.Is(err, netguard.ErrInvalidURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}

func TestCheckURLAcceptsPublic(t *testing.T) {
	g := newGuard(t)
	for _, raw := range []string{
		"https://93.184.215.14/hook",
		"https://1.1.1.1:8443/a/b?c=d#e",
		"https://134744072/", // 8.8.8.8, decimal
		"https://8.8.2056/",  // 8.8.8.8, short form
		"https://100.63.255.255/",
		"https://100.128.0.1/",
		"https://172.32.0.1/",
		"https://[2606:4700:4700::1111]/",
		"https://[::ffff:8.8.8.8]/",
		"https://[64:ff9b::8.8.8.8]/",
		"https://[2002:808:808::1]/", // 6to4 of 8.8.8.8
		"https://example.test/hooks/palisade",
		"https://EXAMPLE.test./",
		"https://does-not-resolve.test/", // checked when connecting
		"https://xn--bcher-kva.test/",
		"https://under_score.test/",
	} {
		if err := g.CheckURL(context.Background(), raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", raw, err)
		}
	}
}

func TestCheckURLAllowList(t *testing.T) {
	g := newGuard(t, "10.0.0.0/8", "127.0.0.1/32", "fd00::/8")
	tests := []struct {
		raw  string
		want error
	}{
		{"http://10.1.2.3/", nil},
		{"https://10.1.2.3/", nil},
		{"http://127.0.0.1:8080/hook", nil},
		{"http://2130706433/", nil},
		{"http://[::ffff:10.0.0.1]/", nil},
		{"https://[fd00::1]/", nil},
		{"http://svc.test/", nil},
		{"https://example.test/", nil},
		{"http://127.0.0.2/", netguard.ErrBlockedAddress},
		{"https://192.168.1.1/", netguard.ErrBlockedAddress},
		{"http://93.184.215.14/", netguard.ErrBlockedAddress}, // http outside the list
		{"http://example.test/", netguard.ErrBlockedAddress},
		{"http://mixed.test/", netguard.ErrBlockedAddress},
		{"http://does-not-resolve.test/", netguard.ErrBlockedAddress},
		{"http://user@10.1.2.3/", netguard.ErrInvalidURL},
	}
	for _, tt := range tests {
		if err := g.CheckURL(context.Background(), tt.raw); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("CheckURL(%q) with an allow-list = %v, want %v", tt.raw, err, tt.want)
		}
	}
	// Without the list, http is never accepted.
	for _, raw := range []string{"http://93.184.215.14/", "http://example.test/", "http://does-not-resolve.test/"} {
		if err := newGuard(t).CheckURL(context.Background(), raw); !errors.Is(err, netguard.ErrBlockedAddress) {
			t.Errorf("CheckURL(%q) = %v, want ErrBlockedAddress", raw, err)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	g := newGuard(t, "192.168.10.0/24")
	tests := []struct {
		addr string
		ok   bool
	}{
		{"8.8.8.8", true},
		{"192.168.10.7", true},
		{"::ffff:192.168.10.7", true},
		{"192.168.11.7", false},
		{"fe80::1%eth0", false},
		{"2606:4700:4700::1111", true},
		{"2001:4860:4860::8888", true},
		{"64:ff9b::c0a8:a07", false}, // NAT64 of an allowed address is a different address
		{"::", false},
	}
	for _, tt := range tests {
		err := g.CheckAddr(netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, netguard.ErrBlockedAddress) {
			t.Errorf("CheckAddr(%s) = %v, want ok %v", tt.addr, err, tt.ok)
		}
	}
}
