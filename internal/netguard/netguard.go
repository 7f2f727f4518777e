// Package netguard owns the rules for outbound requests to URLs that users
// supply, such as webhook endpoints (API.md section 5): which URLs may be
// registered (CheckURL), which addresses may be connected to (CheckAddr),
// and an HTTP client whose dialer applies those rules to the address each
// connection actually goes to, after resolution, so that a name that
// resolves elsewhere later (DNS rebinding) still cannot reach loopback,
// private, link-local (cloud metadata) or other internal addresses.
//
// Only https is allowed, except to addresses inside the operator's
// allow-list (--webhook-allow-cidr), which are also exempt from the address
// rules, for example an in-cluster service network.
package netguard

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
)

// ErrInvalidURL means a URL is not an absolute http or https URL with a
// host, carries user-info, or has a host that is neither a valid name nor
// an IP address.
var ErrInvalidURL = errors.New("netguard: invalid URL")

// ErrBlockedAddress means an address is outside the allow-list and not a
// globally reachable unicast address, or that a plain-http connection
// would leave the allow-list.
var ErrBlockedAddress = errors.New("netguard: address not allowed")

// Config configures a Guard.
type Config struct {
	// Allow lists the ranges outbound requests may reach although the
	// address rules refuse them, and over plain http.
	Allow []netip.Prefix
	// Resolver resolves names for CheckURL and for the dialer; nil means
	// net.DefaultResolver.
	Resolver *net.Resolver
	// TLS is the client's TLS configuration (tests set RootCAs); nil means
	// the system roots. It is cloned, and TLS 1.2 is the minimum.
	TLS *tls.Config
}

// Guard applies the rules. It is safe for concurrent use.
type Guard struct {
	allow    []netip.Prefix
	resolver *net.Resolver
	tls      *tls.Config
}

// New returns a Guard for cfg.
func New(cfg Config) *Guard {
	g := &Guard{resolver: cfg.Resolver}
	for _, p := range cfg.Allow {
		g.allow = append(g.allow, p.Masked())
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if cfg.TLS != nil {
		g.tls = cfg.TLS.Clone()
	} else {
		g.tls = &tls.Config{}
	}
	if g.tls.MinVersion < tls.VersionTLS12 {
		g.tls.MinVersion = tls.VersionTLS12
	}
	return g
}
