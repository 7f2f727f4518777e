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
		a = a.Unmap()
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
	if a.Is6() {
		p, _ := a.Prefix(64) // never fails for a valid IPv6 address
		return p.String()
	}
	return a.String()
}
