package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
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
// whose request outlasts the timeout several times over is not; the
// timeout counts from that request's end. An HTTP/2 connection is first
// told to go away (GOAWAY, NO_ERROR, naming the last stream it took), as
// Go's own HTTP/2 server does.
func TestIdleConnectionsAreClosed(t *testing.T) {
	release := map[string]chan struct{}{"/slow1": make(chan struct{}), "/slow2": make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ch, ok := release[r.URL.Path]; ok {
			<-ch
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
		for _, path := range []string{"/slow1", "/fast"} {
			if path == "/slow1" {
				time.AfterFunc(5*idle, func() { close(release[path]) })
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
		h2Request(t, fr, 1, true, ":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/slow2")
		time.AfterFunc(5*idle, func() { close(release["/slow2"]) })
		answered := false
		var goAway *http2.GoAwayFrame
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				if !answered {
					t.Fatalf("the connection ended before the answer: %v", err)
				}
				if err != io.EOF {
					t.Errorf("the idle connection ended with %v; want it closed (EOF)", err)
				}
				break
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				answered = answered || f.StreamID == 1 && f.StreamEnded()
			case *http2.GoAwayFrame:
				if !answered {
					t.Fatalf("GOAWAY %v while the stream ran", f.ErrCode)
				}
				goAway = f
			}
		}
		if goAway == nil {
			t.Fatal("the idle connection was closed without a GOAWAY")
		}
		if goAway.ErrCode != http2.ErrCodeNo || goAway.LastStreamID != 1 {
			t.Errorf("GOAWAY %v, last stream %d; want NO_ERROR, 1", goAway.ErrCode, goAway.LastStreamID)
		}
	})
}
