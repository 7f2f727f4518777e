package httpserver

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Request writes a request's HEADERS frame on stream id.
func h2Request(t *testing.T, fr *http2.Framer, id uint32, endStream bool, fields ...string) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: endStream, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestDroppedHTTP2ConnectionsAreFreed: an HTTP/2 connection its client
// drops with a stream open is freed once it has been served, not kept
// for the idle timeout.
func TestDroppedHTTP2ConnectionsAreFreed(t *testing.T) {
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = r.Body.Read(make([]byte, 1))
		started <- struct{}{}
		_, _ = io.Copy(io.Discard, r.Body)
	})
	s, addr := serveServer(t, Options{Protocols: h2cProtocols()}, h) // the default idle timeout, 120 s
	chunk := make([]byte, maxH2FrameSize)
	drop := func(n int) {
		for range n {
			c, fr := h2Conn(t, addr)
			h2Request(t, fr, 1, false, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/up", "content-length", "1000000")
			if err := fr.WriteData(1, false, chunk); err != nil {
				t.Fatal(err)
			}
			<-started
			c.Close()
		}
		deadline := time.Now().Add(30 * time.Second)
		for s.h2c.served() != 0 || s.running.n.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections still served, %d handlers running", s.h2c.served(), s.running.n.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	drop(20) // the server's and the runtime's pools
	before := heap()
	const n = 300
	drop(n)
	// Kept for the idle timeout, each connection holds about 22 KB with
	// this frame: 6.6 MB for 300.
	if grew := int64(heap()) - int64(before); grew > 2<<20 {
		t.Errorf("the heap grew %d KB after %d dropped connections had been served (%d bytes each); want them freed", grew>>10, n, grew/n)
	}
}

// TestHTTP2FramesAreBounded: a frame larger than RFC 9113's default
// maximum ends the connection with FRAME_SIZE_ERROR, before the server
// has kept a buffer its size.
func TestHTTP2FramesAreBounded(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	addr := serveTest(t, Options{Protocols: h2cProtocols()}, h)
	for _, size := range []int{maxH2FrameSize, maxH2FrameSize + 1} {
		c, fr := h2Conn(t, addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		h2Request(t, fr, 1, false, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/up")
		if err := fr.WriteData(1, true, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		var goAway *http2.GoAwayFrame
		answered := false
		for goAway == nil && !answered {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("a %d-byte frame: the connection ended (%v) with neither an answer nor a GOAWAY", size, err)
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				goAway = f
			case *http2.HeadersFrame:
				answered = f.StreamID == 1
			}
		}
		if size <= maxH2FrameSize {
			if goAway != nil {
				t.Errorf("a %d-byte frame: GOAWAY %v; want it taken", size, goAway.ErrCode)
			}
			continue
		}
		if goAway == nil || goAway.ErrCode != http2.ErrCodeFrameSize {
			t.Errorf("a %d-byte frame: answered %v, GOAWAY %v; want GOAWAY FRAME_SIZE_ERROR", size, answered, goAway)
		}
	}
}

// TestHTTP2ConnectionAfterShutdownGoesAway: a connection handed over once
// the shutdown has told the others to go away is told too, as soon as its
// HTTP/2 has begun.
func TestHTTP2ConnectionAfterShutdownGoesAway(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	s, addr := serveServer(t, Options{Protocols: h2cProtocols()}, h)
	s.h2c.shutdown() // as the listener's server does first when it shuts down
	c, fr := h2Conn(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	h2Request(t, fr, 1, true, ":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/")
	var goAway *http2.GoAwayFrame
	for goAway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended (%v) without a GOAWAY", err)
		}
		goAway, _ = f.(*http2.GoAwayFrame)
	}
	if goAway.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY %v; want NO_ERROR", goAway.ErrCode)
	}
}
