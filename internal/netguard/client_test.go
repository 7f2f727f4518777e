package netguard_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/netguard"
)

// countingServer counts the requests that reach it.
func countingServer(t *testing.T, tls bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/target", http.StatusFound)
			return
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestClientAllowListReachesLoopback(t *testing.T) {
	srv, hits := countingServer(t, false)
	g := netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err := g.CheckURL(context.Background(), srv.URL+"/hook"); err != nil {
		t.Fatalf("CheckURL(%s) with 127.0.0.1/32 allowed = %v, want nil", srv.URL, err)
	}
	resp, err := g.Client(5*time.Second).Post(srv.URL+"/hook", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("Post(%s) = %v, want a response", srv.URL, err)
	}
	body, _ := netguard.ReadLimited(resp.Body, netguard.ResponseLimit)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" || hits.Load() != 1 {
		t.Errorf("Post(%s) = %d %q after %d hits, want 200 \"ok\" after 1", srv.URL, resp.StatusCode, body, hits.Load())
	}
}

func TestClientRefusesLoopbackAtDial(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		srv, hits := countingServer(t, useTLS)
		g := netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
		_, err := g.Client(5 * time.Second).Get(srv.URL)
		if !errors.Is(err, netguard.ErrBlockedAddress) || hits.Load() != 0 {
			t.Errorf("Get(%s) = %v after %d hits, want ErrBlockedAddress and none", srv.URL, err, hits.Load())
		}
	}
}

// TestClientRefusesDNSRebinding registers a name while it resolves to a
// public address, then lets it resolve to loopback: the connection is
// refused by the check on the address actually dialled.
func TestClientRefusesDNSRebinding(t *testing.T) {
	srv, hits := countingServer(t, true)
	var mu sync.Mutex
	aQueries := 0
	resolver := startDNS(t, func(name string, qtype uint16) ([]netip.Addr, bool) {
		if name != "rebind.test" {
			return nil, false
		}
		if qtype != 1 {
			return nil, true
		}
		mu.Lock()
		defer mu.Unlock()
		aQueries++
		if aQueries == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, true
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, true
	})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: "example.com"} // the test certificate's name

	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	url := "https://rebind.test:" + port + "/hook"
	g := netguard.New(netguard.Config{Resolver: resolver, TLS: tlsConfig})
	if err := g.CheckURL(context.Background(), url); err != nil {
		t.Fatalf("CheckURL(%s) while it resolves to a public address = %v, want nil", url, err)
	}
	_, err := g.Client(5 * time.Second).Get(url)
	if !errors.Is(err, netguard.ErrBlockedAddress) || hits.Load() != 0 {
		t.Fatalf("Get(%s) after rebinding to 127.0.0.1 = %v after %d hits, want ErrBlockedAddress and none", url, err, hits.Load())
	}

	// The control: with loopback allowed, the same name, resolver and TLS
	// setup reach the server, so it was the address check that refused.
	allowed := netguard.New(netguard.Config{Resolver: resolver, TLS: tlsConfig, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	resp, err := allowed.Client(5 * time.Second).Get(url)
	if err != nil {
		t.Fatalf("Get(%s) with loopback allowed = %v, want a response", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || hits.Load() != 1 {
		t.Errorf("Get(%s) with loopback allowed = %d after %d hits, want 200 after 1", url, resp.StatusCode, hits.Load())
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	srv, hits := countingServer(t, false)
	g := netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	resp, err := g.Client(5 * time.Second).Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatalf("Get(/redirect) = %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits.Load() != 1 {
		t.Errorf("Get(/redirect) = %d after %d hits, want 302 after 1 (not followed)", resp.StatusCode, hits.Load())
	}
}

func TestClientSettings(t *testing.T) {
	c := netguard.New(netguard.Config{}).Client(5 * time.Second)
	tr, ok := c.Transport.(*http.Transport)
	switch {
	case !ok:
		t.Fatalf("Client().Transport = %T, want *http.Transport", c.Transport)
	case tr.Proxy != nil:
		t.Errorf("Client().Transport.Proxy is set; want nil, so HTTP_PROXY and friends are never used")
	case c.Timeout != 5*time.Second:
		t.Errorf("Client(5s).Timeout = %v, want 5s", c.Timeout)
	case c.CheckRedirect == nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse:
		t.Errorf("Client().CheckRedirect does not return http.ErrUseLastResponse")
	}
}

func TestDialerRefusesNonTCP(t *testing.T) {
	g := netguard.New(netguard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if c, err := g.Dialer(time.Second).Dial("udp", pc.LocalAddr().String()); !errors.Is(err, netguard.ErrBlockedAddress) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial(udp, %s) = %v, want ErrBlockedAddress", pc.LocalAddr(), err)
	}
}

func TestReadLimited(t *testing.T) {
	for _, n := range []int{0, 10, netguard.ResponseLimit, netguard.ResponseLimit + 1, 1 << 20} {
		got, err := netguard.ReadLimited(bytes.NewReader(make([]byte, n)), netguard.ResponseLimit)
		if want := min(n, netguard.ResponseLimit); err != nil || len(got) != want {
			t.Errorf("ReadLimited(%d bytes, %d) = %d bytes, %v, want %d", n, netguard.ResponseLimit, len(got), err, want)
		}
	}
}
