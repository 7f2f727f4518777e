// Package clientip owns the answer to "who is the client": the peer address,
// unless the peer is a configured trusted proxy, in which case the right-most
// X-Forwarded-For entry that is not itself a trusted proxy.
package clientip

import (
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
func New(cidrs []string) (*Resolver, error) {
	r := &Resolver{}
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return nil, fmt.Errorf("clientip: trusted proxy %q: %w", c, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
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
