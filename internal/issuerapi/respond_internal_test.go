package issuerapi

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A client that stops reading holds an answer's body only until the write
// timeout: the write fails, the handler returns, the body is released.
// Without the deadline the handler waits as long as the connection stays
// open (a probe held 580 MB with five such clients).
func TestWriteRawGivesUpOnAClientThatDoesNotRead(t *testing.T) {
	a := &API{cfg: Config{ResponseWriteTimeout: 200 * time.Millisecond}}
	body := bytes.Repeat([]byte("x"), 32<<20) // far more than the socket buffers take
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		a.writeRaw(w, http.StatusOK, body)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still writes to a client that stopped reading 10s ago; the write timeout is 200ms")
	}
}

// deadlineRecorder records the write deadlines set on it and the writes
// made under each, in order.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	events []string
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	if left := time.Until(t); left < 14*time.Second || left > 15*time.Second {
		d.events = append(d.events, fmt.Sprintf("deadline in %v", left))
		return nil
	}
	d.events = append(d.events, "deadline in 15s")
	return nil
}

func (d *deadlineRecorder) Write(p []byte) (int, error) {
	d.events = append(d.events, fmt.Sprintf("write %d", len(p)))
	return d.ResponseRecorder.Write(p)
}

// Each 256 KiB of a body gets a deadline of its own, set just before it
// is written: a client that keeps reading, however slowly past 17 KiB/s,
// gets the whole body (a probe's verifier reading a 9.45 MB feed at 200
// KB/s was cut off at 6.95 MB by one deadline for all of it).
func TestWriteRawSetsADeadlinePerChunk(t *testing.T) {
	a := &API{cfg: Config{ResponseWriteTimeout: 15 * time.Second}}
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	body := bytes.Repeat([]byte("f"), 4*writeChunk+5)
	a.writeRaw(w, http.StatusOK, body)
	var want []string
	for _, n := range []int{writeChunk, writeChunk, writeChunk, writeChunk, 5} {
		want = append(want, "deadline in 15s", fmt.Sprintf("write %d", n))
	}
	if fmt.Sprint(w.events) != fmt.Sprint(want) {
		t.Fatalf("writeRaw of %d bytes did %v, want %v", len(body), w.events, want)
	}
	if !bytes.Equal(w.Body.Bytes(), body) || w.Header().Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Fatalf("the body or its Content-Length did not arrive whole")
	}
}
