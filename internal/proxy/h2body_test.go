package proxy_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
)

// rawH2Upload sends one POST over HTTP/2 with prior knowledge, framed by
// hand so that its body may disagree with its Content-Length (Go's client
// will not send such a body), and returns the answer's status.
func rawH2Upload(t *testing.T, addr, token string, contentLength int, body []byte) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "app"}, {":path", "/upload"},
		{"authorization", "Bearer " + token}, {"content-length", strconv.Itoa(contentLength)}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true})
	fr.WriteData(1, true, body)
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					status, _ := strconv.Atoi(hf.Value)
					return status
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("the stream was reset (%v) before an answer", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("the connection went away (%v) before an answer", f.ErrCode)
		}
	}
}

// TestShortHTTP2BodyIsTheClients: an HTTP/2 upload that ends before the
// length it declared is the client's malformed request, 400 and counted
// as bad_body, whichever protocol the app speaks. To an h2c app it was
// answered 502 and counted and logged as the app's failure.
func TestShortHTTP2BodyIsTheClients(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			addr, token := appBehindWith(t, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: protocol, Metrics: proxy.NewMetrics(reg, func() float64 { return 0 })},
				func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }, httpserver.Options{})
			if status := rawH2Upload(t, addr, token, 1000, make([]byte, 500)); status != http.StatusBadRequest {
				t.Errorf("a body 500 bytes short of its length = %d, want 400", status)
			}
			if got := failures(t, reg); got[proxy.FailureBadBody] != 1 || got[proxy.FailureUpstream] != 0 {
				t.Errorf("verifier_proxy_failures_total = %v; want one bad_body", got)
			}
		})
	}
}
