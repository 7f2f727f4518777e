// Package clientip owns the answer to "who is the client": the peer address,
// unless the peer is a configured trusted proxy, in which case the right-most
// X-Forwarded-For entry that is not itself a trusted proxy.
package clientip

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds the client address of a request.
type Resolver struct {
	trusted []netip.Prefix
}

// New parses the trusted proxy CIDRs (a bare address counts as a /32 or /128).
// It is strict where a slip would trust the wrong peers: an empty entry (a
// stray comma) is refused rather than skipped, since it could stand alone
// for a list that trusts nobody; so is a prefix with host bits set, whose
// masking silently widened "10.0.0.1/0" to every address. An IPv4-mapped
// entry is read as the IPv4 one, which is how peers are compared.
func New(cidrs []string) (*Resolver, error) {
	r := &Resolver{}
	for _, c := range cidrs {
		p, err := parseTrusted(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("clientip: trusted proxy %q: %w", c, err)
		}
		r.trusted = append(r.trusted, p)
	}
	return r, nil
}

func parseTrusted(c string) (netip.Prefix, error) {
	if c == "" {
		return netip.Prefix{}, errors.New("empty entry")
	}
	p, err := netip.ParsePrefix(c)
	if err != nil {
		a, aerr := netip.ParseAddr(c)
		if aerr != nil {
			return netip.Prefix{}, err
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("has bits set past its /%d; the network is %s", p.Bits(), p.Masked())
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("is an IPv4-mapped prefix shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

func (r *Resolver) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer returns the address of the immediate peer.
func Peer(req *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		a, _ := netip.ParseAddr(req.RemoteAddr)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

// TrustedPeer reports whether the request came straight from a trusted proxy.
func (r *Resolver) TrustedPeer(req *http.Request) bool {
	return r.isTrusted(Peer(req))
}

// ClientIP returns the client's address. Forwarded headers from an untrusted
// peer are ignored, so a client cannot choose its own address.
func (r *Resolver) ClientIP(req *http.Request) netip.Addr {
	peer := Peer(req)
	if !r.isTrusted(peer) {
		return peer
	}
	// Walk the chain from the right: every hop we trust may have appended
	// the one before it; the first untrusted hop is the client.
	var hops []string
	for _, v := range req.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			// A garbled entry: stop believing the chain here.
			return peer
		}
		// A zone is the sender's text ("fe80::1%<img src=x>", 6,000
		// characters of it), meaningless on this host: it was stored with
		// the session and shown back.
		a = a.Unmap().WithZone("")
		if !r.isTrusted(a) {
			return a
		}
		peer = a
	}
	return peer
}

// String is ClientIP as text, "" when unknown.
func (r *Resolver) String(req *http.Request) string {
	a := r.ClientIP(req)
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// Client returns the client as one client counts for per-client limits:
// an IPv4 address, or the /64 an IPv6 address is in ("2001:db8:1:2::/64"),
// "" when unknown. An IPv6 subscriber, a home, a phone, a server, is
// given a /64 at least and may use any address in it (and its operating
// system changes its own every day), so by address each /64 was 2^64
// clients, each with the whole quota of every per-client limit.
func (r *Resolver) Client(req *http.Request) string {
	a := r.ClientIP(req)
	if !a.IsValid() {
		return ""
	}
	if v4, ok := embeddedIPv4(a); ok {
		return v4.String()
	}
	if a.Is6() {
		p, _ := a.Prefix(64) // never fails for a valid IPv6 address
		return p.String()
	}
	return a.String()
}

// The IPv6 prefixes whose addresses stand for an IPv4 one.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052: 64:ff9b::a.b.c.d
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215, the /48 layout of RFC 6052
	siit       = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765: ::ffff:0:a.b.c.d
	compatible = netip.MustParsePrefix("::/96")           // deprecated ::a.b.c.d
	sixToFour  = netip.MustParsePrefix("2002::/16")       // RFC 3056: 2002:AABB:CCDD::/48
	teredo     = netip.MustParsePrefix("2001::/32")       // RFC 4380: the client's address, inverted, last
)

// embeddedIPv4 returns the IPv4 address a translated or tunnelled IPv6
// address stands for. By its /64, every IPv4 client behind a NAT64 or
// SIIT translator (64:ff9b::a.b.c.d) was one client, so one of them could
// spend the login quota of all; every client of one Teredo server was one
// too; and one IPv4 address was 65,536 clients as the /64s of its 6to4
// /48.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case !a.Is6():
		return netip.Addr{}, false
	case nat64.Contains(a), siit.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case nat64Local.Contains(a):
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}), true
	case compatible.Contains(a) && !a.IsLoopback() && !a.IsUnspecified():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}
