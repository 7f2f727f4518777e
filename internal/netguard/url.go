package netguard

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// CheckURL checks a URL at registration. It returns an error wrapping
// ErrInvalidURL unless raw is an absolute https URL (or http, see below)
// with a host and without user-info, and an error wrapping
// ErrBlockedAddress when its host is, or now resolves to, an address
// CheckAddr refuses. Every resolved address is checked. A name that does
// not resolve now is accepted: the dialer checks it when connecting. http
// is accepted only when the host is an IP address inside the allow-list,
// or a name that resolves now, only to addresses inside it.
//
// A host is an IP address in every spelling a resolver or browser would
// take as one, not only the dotted quad: decimal (2130706433), octal
// (0177.0.0.1), hexadecimal (0x7f.1), short forms (127.1), any IPv6 form,
// with or without a trailing dot. A host whose last label is a number but
// that is not such an address (1.2.3.256) is refused as invalid, as
// browsers do. "localhost" and names under it are refused without a
// lookup.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: scheme %q, want https", ErrInvalidURL, u.Scheme)
	case u.Opaque != "" || u.Host == "":
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	case u.User != nil:
		return fmt.Errorf("%w: user-info is not allowed", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("%w: port %q", ErrInvalidURL, p)
		}
	}
	plain := u.Scheme == "http"
	host, err := canonicalHost(u.Hostname())
	if err != nil {
		return err
	}
	var addrs []netip.Addr
	if a, ok, err := literal(host); err != nil {
		return err
	} else if ok {
		addrs = []netip.Addr{a}
	} else {
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return fmt.Errorf("%w: %s is loopback", ErrBlockedAddress, host)
		}
		addrs, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if plain {
				return fmt.Errorf("%w: http to %s, which does not resolve into the allow-list; want https", ErrBlockedAddress, host)
			}
			return nil // checked when connecting
		}
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
		if plain && !g.allowed(a) {
			return fmt.Errorf("%w: http to %s, outside the allow-list; want https", ErrBlockedAddress, a.Unmap())
		}
	}
	return nil
}

// canonicalHost lowercases host, drops one trailing dot, and checks that
// what is left is an IPv6 literal or made of DNS labels.
func canonicalHost(host string) (string, error) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if strings.Contains(host, ":") {
		return host, nil // an IPv6 literal; literal parses it
	}
	if host == "" || len(host) > 253 {
		return "", fmt.Errorf("%w: host %q", ErrInvalidURL, host)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%w: host %q has an empty or overlong label", ErrInvalidURL, host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%w: host %q (internationalized names must be given in punycode)", ErrInvalidURL, host)
			}
		}
	}
	return host, nil
}

// literal returns the IP address host spells, and whether it spells one.
// It fails for a host ending in a numeric label that is not an address.
func literal(host string) (netip.Addr, bool, error) {
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, false, fmt.Errorf("%w: host %q is not an IPv6 address", ErrInvalidURL, host)
		}
		return a, true, nil
	}
	if a, ok := parseIPv4(host); ok {
		return a, true, nil
	}
	labels := strings.Split(host, ".")
	if numeric(labels[len(labels)-1]) {
		return netip.Addr{}, false, fmt.Errorf("%w: host %q ends in a number but is not an IPv4 address", ErrInvalidURL, host)
	}
	return netip.Addr{}, false, nil
}

// parseIPv4 parses an IPv4 address the way inet_aton(3) does, and with it
// getaddrinfo, curl and the WHATWG URL parser: one to four dot-separated
// parts, each decimal, octal (leading 0) or hexadecimal (leading 0x); the
// last part fills the bytes the others left (127.1 is 127.0.0.1,
// 2130706433 is 127.0.0.1).
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i)) // bits the last part fills
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part parses one part of an IPv4 address: decimal, octal with a
// leading 0, or hexadecimal with a leading 0x ("0x" alone is 0, as in the
// WHATWG parser). Values above 2^32 fail.
func parseIPv4Part(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 1<<32 || strings.ContainsAny(p, "+-_") {
		return 0, false
	}
	return n, true
}

// numeric reports whether a label is a number as the WHATWG URL parser
// sees one: ASCII digits only, or 0x and hexadecimal digits.
func numeric(label string) bool {
	digits := "0123456789"
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		label, digits = label[2:], "0123456789abcdefABCDEF"
		if label == "" {
			return true
		}
	}
	return label != "" && strings.Trim(label, digits) == ""
}
