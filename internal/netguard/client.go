package netguard

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ResponseLimit is how much of a response body ReadLimited is meant to
// keep by default: enough to log why an endpoint refused a delivery.
const ResponseLimit = 4 << 10

// maxResponseHeaderBytes bounds the response headers an endpoint may send.
const maxResponseHeaderBytes = 64 << 10

// Dialer returns a net.Dialer that resolves with the Guard's resolver and,
// through ControlContext, refuses every connection whose address CheckAddr
// refuses. The check runs on the address the socket is about to connect
// to, after resolution, for every address tried, so a name that resolved
// to a public address at registration and to an internal one now is
// refused. Only TCP is allowed.
func (g *Guard) Dialer(timeout time.Duration) *net.Dialer {
	return g.dialer(timeout, false)
}

// dialer returns the Dialer; plain restricts it to the allow-list, for
// connections that will carry plain http.
func (g *Guard) dialer(timeout time.Duration, plain bool) *net.Dialer {
	return &net.Dialer{
		Timeout:  timeout,
		Resolver: g.resolver,
		ControlContext: func(_ context.Context, network, address string, _ syscall.RawConn) error {
			return g.control(network, address, plain)
		},
	}
}

func (g *Guard) control(network, address string, plain bool) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s", ErrBlockedAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q: %v", ErrBlockedAddress, address, err)
	}
	if err := g.CheckAddr(ap.Addr()); err != nil {
		return err
	}
	if plain && !g.allowed(ap.Addr()) {
		return fmt.Errorf("%w: plain http to %s, outside the allow-list", ErrBlockedAddress, ap.Addr().Unmap())
	}
	return nil
}

// Client returns an HTTP client for requests to user-supplied URLs. Every
// request, from dial to the end of the body, must finish within timeout.
// It follows no redirect (a 3xx is returned as the response), never uses a
// proxy (the environment's HTTP_PROXY included), connects only where
// CheckAddr allows, and sends plain http only to addresses inside the
// allow-list: https connections are made by the Dialer and TLS (1.2 at
// least), http connections by a dialer that also requires the allow-list.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	tlsDialer := &tls.Dialer{NetDialer: g.dialer(timeout, false), Config: g.tls.Clone()}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            g.dialer(timeout, true).DialContext,
			DialTLSContext:         tlsDialer.DialContext,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			IdleConnTimeout:        90 * time.Second,
			MaxIdleConnsPerHost:    2,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// ReadLimited reads r until EOF or n bytes, whichever comes first, and
// returns what it read: the start of a response body, kept for a
// delivery's last_error, without reading an endless body. Use
// ResponseLimit for n unless there is a reason not to.
func ReadLimited(r io.Reader, n int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, n))
}
