package netguard

import (
	"fmt"
	"net/netip"
)

// blockedRange is a range no outbound request may reach, and why.
type blockedRange struct {
	prefix netip.Prefix
	why    string
}

func mustRanges(pairs ...string) []blockedRange {
	r := make([]blockedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		r = append(r, blockedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return r
}

// blocked4 is every IPv4 range of the IANA special-purpose registry that
// is not globally reachable, plus multicast and the reserved class E.
var blocked4 = mustRanges(
	"0.0.0.0/8", "\"this network\" (0.0.0.0 is unspecified)",
	"10.0.0.0/8", "private (RFC 1918)",
	"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local (cloud metadata endpoints)",
	"172.16.0.0/12", "private (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignments (RFC 6890)",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)",
	"192.168.0.0/16", "private (RFC 1918)",
	"198.18.0.0/15", "benchmarking (RFC 2544)",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved (255.255.255.255 is broadcast)",
)

// global6 is the IPv6 global unicast space; every other IPv6 address
// (unspecified, loopback, IPv4-compatible ::/96, IPv4-translated
// ::ffff:0:0:0/96, discard 100::/64, SRv6 5f00::/16, ULA fc00::/7,
// link-local fe80::/10, site-local fec0::/10, multicast ff00::/8, ...) is
// refused, except the NAT64 prefix, whose embedded IPv4 address decides.
var global6 = netip.MustParsePrefix("2000::/3")

// blocked6 is the part of global6 that is not globally reachable or that
// hides an address this package cannot judge.
var blocked6 = mustRanges(
	"2001::/23", "IETF protocol assignments (Teredo 2001::/32, benchmarking, ORCHID)",
	"2001:db8::/32", "documentation",
	"3fff::/20", "documentation (RFC 9637)",
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the last 32 bits are the IPv4 address
	sixToFour = netip.MustParsePrefix("2002::/16")    // RFC 3056: bits 16-47 are the IPv4 address
)

// CheckAddr returns nil if an outbound connection may reach addr: when
// addr is inside one of the allow-list's ranges, or when it is a globally
// reachable unicast address. An IPv4-mapped address (::ffff:a.b.c.d) is
// judged as the IPv4 address it is; a NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) address as the IPv4 address it embeds. Otherwise it returns
// an error wrapping ErrBlockedAddress that says which rule refused it.
func (g *Guard) CheckAddr(addr netip.Addr) error {
	addr = addr.WithZone("").Unmap()
	if g.allowed(addr) {
		return nil
	}
	if why := nonGlobal(addr); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrBlockedAddress, addr, why)
	}
	return nil
}

// allowed reports whether addr is inside the allow-list.
func (g *Guard) allowed(addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	for _, p := range g.allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// nonGlobal returns why addr is not a globally reachable unicast address,
// or "" when it is one.
func nonGlobal(addr netip.Addr) string {
	addr = addr.WithZone("").Unmap()
	if !addr.IsValid() {
		return "not an IP address"
	}
	if addr.Is4() {
		for _, r := range blocked4 {
			if r.prefix.Contains(addr) {
				return r.why
			}
		}
		return ""
	}
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		if why := nonGlobal(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return "NAT64 for an address that is " + why
		}
		return ""
	case sixToFour.Contains(addr):
		if why := nonGlobal(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
			return "6to4 for an address that is " + why
		}
		return ""
	case !global6.Contains(addr):
		return describe6(addr)
	}
	for _, r := range blocked6 {
		if r.prefix.Contains(addr) {
			return r.why
		}
	}
	return ""
}

// describe6 names the non-global IPv6 range addr is in, for the error.
func describe6(addr netip.Addr) string {
	switch {
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsPrivate():
		return "unique local (ULA, fc00::/7)"
	case addr.IsMulticast():
		return "multicast"
	case netip.MustParsePrefix("::/96").Contains(addr):
		return "IPv4-compatible (deprecated, ::/96)"
	}
	return "outside IPv6 global unicast (2000::/3)"
}
