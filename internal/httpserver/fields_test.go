package httpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// withFields is a request of method to path with n header fields, Host
// included (and body, when not empty, with its Content-Length one more),
// as HTTP/1.1 text.
func withFields(method, path string, n int, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: x\r\n", method, path)
	for i := range n - 1 { // Host is one
		fmt.Fprintf(&b, "%dx:\r\n", i)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body)) // one more field
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.String()
}

// TestHeaderFieldsAreBounded: an HTTP/1 request may have at most
// MaxHeaderFields header fields, whatever their size; one more is
// answered 431 problem+json, never reaches the handler, and closes the
// connection. Each request on a kept-alive connection counts its own, a
// body's lines are no fields, and a request net/http answers itself
// (OPTIONS *) does not stop the counting of the next. Before, 9,000 empty
// fields in 64 KiB cost a MiB a request.
func TestHeaderFieldsAreBounded(t *testing.T) {
	var handled atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	addr := serveTest(t, Options{MaxHeaderFields: 20}, h)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	send := func(c net.Conn, br *bufio.Reader, req string) (*http.Response, string) {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}

	// One connection: 20 fields pass, twice, then a body of 300 lines
	// with 19 fields, then OPTIONS *, then 20 again.
	c, br := dial()
	body := strings.Repeat("line\r\n", 300)
	for i, req := range []string{
		withFields("GET", "/", 20, ""),
		withFields("GET", "/", 20, ""),
		withFields("POST", "/", 19, body),
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		withFields("GET", "/", 20, ""),
	} {
		if resp, got := send(c, br, req); resp.StatusCode/100 != 2 {
			t.Fatalf("request %d on the connection = %d %s, want it served", i+1, resp.StatusCode, got)
		}
	}
	// The same connection: 21 fields.
	before := handled.Load()
	resp, got := send(c, br, withFields("GET", "/", 21, ""))
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(got, `"code":"too_many_header_fields"`) {
		t.Errorf("21 fields = %d %s %s, want 431 problem+json too_many_header_fields", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	if handled.Load() != before {
		t.Errorf("the request with 21 fields reached the handler")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 431 the connection reads %v, want EOF (closed)", err)
	}
	// Pipelined behind a request in one write, a request is read from
	// what net/http buffered, which the line count may not see: its
	// fields are counted at its handler's start. And a pipelined
	// request's body that comes later is no header.
	c, br = dial()
	if _, err := io.WriteString(c, withFields("GET", "/", 5, "")+withFields("GET", "/", 60, "")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{http.StatusNoContent, http.StatusRequestHeaderFieldsTooLarge} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("pipelined request %d = %v, %v; want %d", i+1, resp, err, want)
		}
		resp.Body.Close()
	}
	c, br = dial()
	if _, err := io.WriteString(c, withFields("GET", "/", 5, "")+fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the GET before a pipelined POST = %v, %v", resp, err)
	}
	if _, err := io.WriteString(c, body); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("a pipelined POST whose 300-line body came later = %v, %v; want 204", resp, err)
	}
	// Folded lines continue a field: 15 fields on 29 lines pass.
	c, br = dial()
	folded := "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: 1\r\n 2\r\n", 14) + "\r\n"
	if resp, _ := send(c, br, folded); resp.StatusCode != http.StatusNoContent {
		t.Errorf("15 fields, 14 of them folded = %d, want 204", resp.StatusCode)
	}
	// 9,000 empty fields on a new connection, the first request.
	c, br = dial()
	if resp, _ := send(c, br, withFields("GET", "/", 9000, "")); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("9,000 fields = %d, want 431", resp.StatusCode)
	}
}

// TestHTTP2FieldsAreCountedNotLines: on a listener that speaks HTTP/2
// too, an HTTP/2 connection's frames are not read as header lines (a body
// of 1,000 '\n' is served), and a stream with more fields than
// MaxHeaderFields is answered 431 (HTTP/2 bounds them only by the bytes of
// the header: 1,850 fit in 64 KiB), while its connection serves on.
func TestHTTP2FieldsAreCountedNotLines(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	addr := serveTest(t, Options{Protocols: h2cProtocols(), MaxHeaderFields: 5}, h)
	c, fr := h2Conn(t, addr)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	status := func(id uint32) string {
		t.Helper()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("no answer to stream %d: %v", id, err)
			}
			if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.StreamID == id {
				return mh.PseudoValue("status")
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v, want stream %d answered", ga.ErrCode, id)
			}
		}
	}
	fields := func(n int) []string {
		f := []string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/"}
		for i := range n {
			f = append(f, fmt.Sprintf("f%d", i), "v")
		}
		return f
	}
	h2Request(t, fr, 1, false, fields(4)...) // with :authority, 5
	if err := fr.WriteData(1, true, []byte(strings.Repeat("\n", 1000))); err != nil {
		t.Fatal(err)
	}
	if got := status(1); got != "204" {
		t.Errorf("5 fields and a body of newlines = %s, want 204", got)
	}
	h2Request(t, fr, 3, true, fields(50)...)
	if got := status(3); got != "431" {
		t.Errorf("51 fields = %s, want 431", got)
	}
	h2Request(t, fr, 5, true, fields(1)...)
	if got := status(5); got != "204" {
		t.Errorf("the next stream = %s, want 204: the connection serves on", got)
	}
}

// An HTTP/2 stream's header is at most maxH2HeaderBytes, whatever the
// listener's MaxHeaderBytes (64 KiB by default): 20 fields of 600 bytes
// pass, 30 are answered 431.
func TestHTTP2HeaderBytesAreBounded(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	addr := serveTest(t, Options{Protocols: h2cProtocols()}, h)
	c, fr := h2Conn(t, addr)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for i, tc := range []struct {
		fields int
		want   string
	}{{20, "204"}, {30, "431"}} {
		id := uint32(2*i + 1)
		f := []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/"}
		for j := range tc.fields {
			f = append(f, fmt.Sprintf("f%d", j), strings.Repeat("v", 600))
		}
		h2Request(t, fr, id, true, f...)
		for got := ""; got == ""; {
			fm, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("%d fields of 600 bytes: no answer: %v", tc.fields, err)
			}
			if mh, ok := fm.(*http2.MetaHeadersFrame); ok && mh.StreamID == id {
				if got = mh.PseudoValue("status"); got != tc.want {
					t.Errorf("%d fields of 600 bytes = %s, want %s", tc.fields, got, tc.want)
				}
			}
		}
	}
}

// FuzzFieldScan: fed in any two pieces, fieldConn's count of a header
// agrees with counting its lines whole: over the limit exactly when more
// than the request line and max fields come before the first blank line
// (one that is empty or a lone '\r'), and done counting exactly when that
// blank line came first.
func FuzzFieldScan(f *testing.F) {
	for _, s := range []string{"GET / HTTP/1.1\r\nA: 1\r\n\r\n", "\r\n\r\nGET / HTTP/1.1\r\na:\r\nb:\r\nc:\r\nd:\r\n", "GET /\n\r\r\n\n", "x\r"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		const max = 3
		wantOver, wantDone := false, false
		lines := 0
		for rest := string(data); ; {
			line, after, found := strings.Cut(rest, "\n")
			if !found {
				break
			}
			rest = after
			if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue // a continuation of the field above
			}
			if line == "" || line == "\r" {
				if lines > 0 {
					wantDone = true
					break
				}
				continue
			}
			if lines++; lines > max+1 {
				wantOver = true
				break
			}
		}
		c := &fieldConn{max: max}
		at := min(int(cut), len(data))
		over := c.scan(data[:at])
		if !over && c.state.Load() == fieldsCounting {
			over = c.scan(data[at:])
		}
		if over != wantOver || !over && (c.state.Load() == fieldsDone) != wantDone {
			t.Errorf("scan(%q | %q) = over %v, done %v; want %v, %v", data[:at], data[at:], over, c.state.Load() == fieldsDone, wantOver, wantDone)
		}
	})
}

// A request with both Content-Length and Transfer-Encoding is answered,
// then its connection closed (RFC 9112, 6.3): net/http reads such a body
// as chunked and kept the connection, so what a front proxy that trusted
// the length took for the body was served as the next request. A chunked
// request alone keeps its connection.
func TestLengthAndChunkedCloseTheConnection(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	addr := serveTest(t, Options{}, h)
	const next = "GET /second HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name, first string
		kept        bool
	}{
		{"chunked", "POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true},
		{"length and chunked", "POST /first HTTP/1.1\r\nHost: x\r\ncontent-LENGTH: 34\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, tc.first+next); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: first answer %v, %v; want 204", tc.name, resp, err)
		}
		resp, err = http.ReadResponse(br, nil)
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s: the pipelined request answered %v (%v); want %v", tc.name, kept, err, tc.kept)
		} else if kept {
			resp.Body.Close()
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/first", "/second", "/first"}; !slices.Equal(paths, want) {
		t.Errorf("the handler saw %q, want %q", paths, want)
	}
}

// A request fieldConn answers 431 itself, before any handler, still gets
// an access line.
func TestRefusedHeaderIsLogged(t *testing.T) {
	log, buf := newTestLogger()
	s := New("test", log, http.NotFoundHandler(), Options{MaxHeaderFields: 5})
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, withFields("GET", "/", 6, "")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("6 fields = %v, %v; want 431", resp, err)
	}
	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 || lines[0]["status"] != float64(431) || lines[0]["remote_addr"] != c.LocalAddr().String() || lines[0]["bytes"] == float64(0) {
		t.Errorf("access lines = %v, want one with status 431 from %s", lines, c.LocalAddr())
	}
}
