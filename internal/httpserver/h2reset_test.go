package httpserver

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2RapidResetClosesTheConnection: the server allows maxH2Streams
// streams a connection, and a connection whose client resets most of its
// streams just after opening them ("rapid reset") is closed, while one
// whose streams are answered stays open however many it opens. Before, 20
// connections opening and resetting streams in a loop held the verifier
// at 359 MB (1 GB with 100), and a client beside them got 11 answers in
// 10 s; now 78 MB (152), and 25.
func TestHTTP2RapidResetClosesTheConnection(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select { // a proxy waiting for its app
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	addr := serveTest(t, Options{Protocols: h2cProtocols()}, h)
	request := func(fr *http2.Framer, id uint32, path string) {
		h2Request(t, fr, id, true, ":method", "GET", ":scheme", "http", ":authority", "x", ":path", path)
	}
	// answered reads frames until stream id's answer, and reports whether
	// it came before the connection ended.
	answered := func(fr *http2.Framer, id uint32) (bool, error) {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return false, err
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok && v != maxH2Streams {
					t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want %d", v, maxH2Streams)
				}
			case *http2.HeadersFrame:
				if f.StreamID == id {
					return true, nil
				}
			}
		}
	}

	c, fr := h2Conn(t, addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var id uint32 = 1
	for ; id < 2*300; id += 2 {
		request(fr, id, "/ok")
		if ok, err := answered(fr, id); !ok {
			t.Fatalf("answered request %d: the connection ended: %v", id/2+1, err)
		}
	}

	c, fr = h2Conn(t, addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/wait"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	sent := make(chan struct{})
	go func() { // its writes fail once the server has closed the connection
		defer close(sent)
		for id := uint32(1); id < 2*300; id += 2 {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	defer func() { c.Close(); <-sent }()
	// No stream has this id: only the connection's end (or the
	// deadline, a failure) ends the read.
	_, err := answered(fr, 1<<20)
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("after 300 streams reset at once the connection stayed open: %v", err)
	}
}

// Streams reset once their handlers have begun count too, handlers that
// end by panicking with http.ErrAbortHandler (as the proxy's do when the
// client leaves) included: a client that opened streams, waited for them
// to reach the app and then reset them made 22,700 streams on one
// connection, which stayed open.
func TestHTTP2ResetsOfRunningStreamsCount(t *testing.T) {
	started := make(chan struct{}, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	})
	addr := serveTest(t, Options{Protocols: h2cProtocols()}, h)
	c, fr := h2Conn(t, addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	goAway := make(chan error, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				goAway <- err
				return
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				goAway <- nil
				return
			}
		}
	}()
	id := uint32(1)
	for round := range 20 { // 200 streams, each reset once its handler runs
		first := id
		for range 10 {
			h2Request(t, fr, id, true, ":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/")
			id += 2
		}
		for range 10 {
			select {
			case <-started:
			case err := <-goAway:
				if err != nil {
					t.Fatalf("round %d: the connection ended without a GOAWAY: %v", round, err)
				}
				return // told to go away: passed
			}
		}
		for s := first; s < id; s += 2 {
			if err := fr.WriteRSTStream(s, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := <-goAway; err != nil {
		t.Errorf("200 streams reset as they ran: the connection ended without a GOAWAY: %v", err)
	}
}
