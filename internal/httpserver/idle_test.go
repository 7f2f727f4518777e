package httpserver

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func h2cProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// h2Conn opens an HTTP/2 connection with prior knowledge and sends the
// preface and its settings.
func h2Conn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// TestIdleConnectionsAreClosed: a connection with nothing in progress is
// closed once the idle timeout has passed, on either protocol, and one
// whose request outlasts the timeout is not.
func TestIdleConnectionsAreClosed(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	const idle = 100 * time.Millisecond
	addr := serveTest(t, Options{IdleTimeout: idle, Protocols: h2cProtocols()}, h)

	t.Run("HTTP/1.1", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for _, path := range []string{"/slow", "/fast"} {
			if path == "/slow" {
				// The request outlasts the idle timeout several times over.
				time.AfterFunc(5*idle, func() { close(release) })
			}
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Fatalf("GET %s: %d %q", path, resp.StatusCode, body)
			}
		}
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("idle connection read %d bytes, %v; want it closed (EOF)", n, err)
		}
	})

	t.Run("HTTP/2", func(t *testing.T) {
		c, fr := h2Conn(t, addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/fast"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		ended := false
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				if !ended {
					t.Fatalf("connection ended before the answer: %v", err)
				}
				if err != io.EOF {
					t.Errorf("idle connection ended with %v; want it closed (EOF)", err)
				}
				return
			}
			if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
				ended = true
			}
		}
	})
}
