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
