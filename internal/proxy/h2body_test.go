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
// will not send such a body), with the extra header fields, and returns
// the answer's head.
func rawH2Upload(t *testing.T, addr, token string, contentLength int, body []byte, extra ...string) map[string]string {
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
	for i := 0; i+1 < len(extra); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
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
			head := map[string]string{}
			for _, hf := range fields {
				head[hf.Name] = hf.Value
			}
			return head
		case *http2.RSTStreamFrame:
			t.Fatalf("the stream was reset (%v) before an answer", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("the connection went away (%v) before an answer", f.ErrCode)
		}
	}
}

// TestShortHTTP2BodyIsTheClients: an HTTP/2 upload that ends before the
// length it declared is the client's malformed request, 400 and counted
// as bad_body, whichever protocol the app speaks; a gRPC call is told so
// in its own form, INTERNAL (gRPC's reading of 400). To an h2c app it
// was answered 502 and counted and logged as the app's failure; then a
// gRPC call got 400 problem+json.
func TestShortHTTP2BodyIsTheClients(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			addr, token := appBehindWith(t, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: protocol, Metrics: proxy.NewMetrics(reg, func() float64 { return 0 })},
				func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }, httpserver.Options{})
			if head := rawH2Upload(t, addr, token, 1000, make([]byte, 500)); head[":status"] != "400" || head["content-type"] != "application/problem+json" {
				t.Errorf("a body 500 bytes short of its length = %v, want 400 problem+json", head)
			}
			if head := rawH2Upload(t, addr, token, 1000, make([]byte, 500), "content-type", "application/grpc", "te", "trailers"); head[":status"] != "200" || head["grpc-status"] != "13" {
				t.Errorf("a gRPC call 500 bytes short of its length = %v, want 200 and grpc-status 13", head)
			}
			if got := failures(t, reg); got[proxy.FailureBadBody] != 2 || got[proxy.FailureUpstream] != 0 {
				t.Errorf("verifier_proxy_failures_total = %v; want two bad_body", got)
			}
		})
	}
}
