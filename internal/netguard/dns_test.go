package netguard_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// answerFunc answers a query for name (lowercase, no trailing dot) of
// qtype (1 for A, 28 for AAAA); ok false means the name does not exist.
type answerFunc func(name string, qtype uint16) (addrs []netip.Addr, ok bool)

// staticAnswers answers from a table of names.
func staticAnswers(table map[string][]string) answerFunc {
	return func(name string, qtype uint16) ([]netip.Addr, bool) {
		list, ok := table[name]
		var out []netip.Addr
		for _, s := range list {
			a := netip.MustParseAddr(s)
			if a.Is4() == (qtype == 1) {
				out = append(out, a)
			}
		}
		return out, ok
	}
}

// startDNS runs a minimal DNS server on a loopback UDP port, answering A
// and AAAA queries with answer, and returns a resolver that asks only it.
// It is just enough DNS for the Go resolver: one question, answers with a
// compression pointer to it, NXDOMAIN for unknown names.
func startDNS(t *testing.T, answer answerFunc) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], answer); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	server := pc.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		},
	}
}

func dnsAnswer(q []byte, answer answerFunc) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels up to a zero byte, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l&0xC0 != 0 || i+1+l > len(q) {
			return nil
		}
		labels = append(labels, strings.ToLower(string(q[i+1:i+1+l])))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	question := q[12 : i+5]
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	addrs, ok := answer(strings.Join(labels, "."), qtype)

	resp := make([]byte, 12, 512)
	copy(resp[0:2], q[0:2])                           // id
	flags := uint16(0x8000 | 0x0400 | 0x0080)         // response, authoritative, recursion available
	flags |= binary.BigEndian.Uint16(q[2:4]) & 0x0100 // recursion desired, echoed
	if !ok {
		flags |= 3 // NXDOMAIN
		addrs = nil
	}
	binary.BigEndian.PutUint16(resp[2:4], flags)
	binary.BigEndian.PutUint16(resp[4:6], 1)
	binary.BigEndian.PutUint16(resp[6:8], uint16(len(addrs)))
	resp = append(resp, question...)
	for _, a := range addrs {
		resp = append(resp, 0xC0, 12) // the name: a pointer to the question's
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		b := a.AsSlice()
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(b)))
		resp = append(resp, b...)
	}
	return resp
}

func TestDNSHelper(t *testing.T) {
	r := startDNS(t, staticAnswers(map[string][]string{"both.test": {"192.0.2.1", "2001:db8::1"}}))
	got, err := r.LookupNetIP(context.Background(), "ip", "both.test")
	if err != nil || len(got) != 2 {
		t.Fatalf("LookupNetIP(both.test) = %v, %v, want two addresses", got, err)
	}
	_, err = r.LookupNetIP(context.Background(), "ip", "missing.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("LookupNetIP(missing.test) error = %v, want not found", err)
	}
}
