package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/problem"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// refusal is a request the verifier answers itself instead of the app. The
// gate and the proxy decide which; refuse picks the form of the answer.
type refusal int

const (
	refuseUnauthenticated refusal = iota // no valid token: 401
	refuseCSRF                           // a cookie-authenticated request failing the CSRF rule: 403
	refuseBodyTimeout                    // the body stalled or trickled: 408
	refuseBadBody                        // the body was malformed: 400
	refuseUpstream                       // the app did not answer: 502
)

// The gRPC status codes of the refusals (google.golang.org/grpc/codes),
// the mapping gRPC's own HTTP-to-gRPC table makes for the statuses the
// HTTP form has, and DEADLINE_EXCEEDED for a client too slow to send.
const (
	grpcDeadlineExceeded = 4
	grpcPermissionDenied = 7
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcUnauthenticated  = 16
)

// grpcRefusal is the status and message of each refusal. The messages say
// no more than the problem+json details do.
var grpcRefusals = [...]struct {
	code    int
	message string
}{
	refuseUnauthenticated: {grpcUnauthenticated, "missing or invalid access token"},
	refuseCSRF:            {grpcPermissionDenied, "the request failed the CSRF check"},
	refuseBodyTimeout:     {grpcDeadlineExceeded, "the request body did not arrive in time"},
	refuseBadBody:         {grpcInternal, "the request body was malformed"},
	refuseUpstream:        {grpcUnavailable, "the application behind the verifier did not answer"},
}

// refuse writes the answer to a refused request: a gRPC status when the
// request is a gRPC call and the gate is the proxy's, else the HTTP status
// with its problem+json body. Forward-auth never answers in
// gRPC: the proxy asking reads only the HTTP status, and a 200 carrying
// grpc-status would let the call through.
func (g *gate) refuse(w http.ResponseWriter, r *http.Request, why refusal) {
	if !g.httpOnly && httpserver.IsGRPC(r.Header) {
		writeGRPCStatus(w, r.Header, grpcRefusals[why].code, grpcRefusals[why].message, why == refuseUnauthenticated)
		return
	}
	switch why {
	case refuseUnauthenticated:
		verify.WriteUnauthorized(w)
	case refuseCSRF:
		verify.WriteCSRFFailed(w)
	case refuseBodyTimeout:
		problem.Write(w, problem.Problem{
			Status: http.StatusRequestTimeout, Code: "request_timeout",
			Detail: "The request body did not arrive in time.",
		})
	case refuseBadBody:
		problem.Write(w, problem.Problem{Status: http.StatusBadRequest, Code: "malformed_request", Detail: "The request body was malformed."})
	case refuseUpstream:
		problem.Write(w, problem.Problem{
			Status: http.StatusBadGateway, Code: "bad_gateway", Title: "Bad Gateway",
			Detail: "The application behind the verifier did not answer.",
		})
	}
}

// grpcLengthPrefix is the length of the prefix of every gRPC message: a
// compressed flag and the message's length, big-endian.
const grpcLengthPrefix = 5

// boundFirstMessage returns r, or, when r is a gRPC call over HTTP/2, a
// shallow copy whose body deadlines (--read-idle-timeout, --read-min-rate)
// end once the call's first message has arrived whole: a unary call's
// request is that one message, bounded like any upload, but after it a
// client- or bidirectional-streaming call's request body is the client's
// side of a conversation, quiet for as long as the client has nothing to
// say. Cutting it there would end streams that a direct connection to the
// app keeps; it ends instead with the call (its deadline, either side),
// the connection or the server's shutdown. ServeHTTP applies it only to a
// call with a valid token in front of an h2c app: over HTTP/1.1 no gRPC
// call works, and the body is an upload to an app that the bounds protect.
func boundFirstMessage(r *http.Request) *http.Request {
	if r.ProtoMajor != 2 || r.Body == nil || r.Body == http.NoBody || !httpserver.IsGRPC(r.Header) {
		return r
	}
	r = r.WithContext(r.Context()) // the server's request stays as it came
	r.Body = &firstMessage{ReadCloser: r.Body, ctx: r.Context()}
	return r
}

// firstMessage counts a gRPC request body's bytes until its first message
// is complete, then lifts the body deadlines from the rest. Its reads come
// from one goroutine at a time, as a request body's do.
type firstMessage struct {
	io.ReadCloser
	ctx    context.Context
	prefix [grpcLengthPrefix]byte
	seen   int64 // bytes read, until the first message was complete
	done   bool
}

func (b *firstMessage) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.done && n > 0 {
		copy(b.prefix[min(b.seen, grpcLengthPrefix):], p[:n])
		b.seen += int64(n)
		if b.seen >= grpcLengthPrefix && b.seen >= grpcLengthPrefix+int64(binary.BigEndian.Uint32(b.prefix[1:])) {
			b.done = true
			httpserver.LiftBodyDeadlines(b.ctx)
		}
	}
	return n, err
}

// writeGRPCStatus answers a gRPC call with a trailers-only response: HTTP
// 200 whose headers carry the status, and no body, as the gRPC over HTTP/2
// spec has a server reject a call. A gRPC-Web call gets its own content
// type, which its clients check.
func writeGRPCStatus(w http.ResponseWriter, req http.Header, code int, message string, unauthenticated bool) {
	h := w.Header()
	ct := "application/grpc"
	if reqCT := strings.ToLower(req.Get("Content-Type")); strings.HasPrefix(reqCT, "application/grpc-web-text") {
		ct = "application/grpc-web-text"
	} else if strings.HasPrefix(reqCT, "application/grpc-web") {
		ct = "application/grpc-web"
	}
	h.Set("Content-Type", ct)
	h.Set("Grpc-Status", strconv.Itoa(code))
	h.Set("Grpc-Message", grpcPercentEncode(message))
	if unauthenticated {
		// As every 401 has: a client reading headers learns the scheme.
		h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	w.WriteHeader(http.StatusOK)
}

// grpcPercentEncode encodes a grpc-message value as the gRPC spec asks:
// every byte outside printable ASCII, and '%' itself, as %XX.
func grpcPercentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// Upstream protocols of --upstream-protocol.
const (
	UpstreamHTTP1 = "http1"
	UpstreamH2C   = "h2c"
)

// NewH2CTransport is the transport to an upstream speaking HTTP/2 without
// TLS, with prior knowledge (a gRPC server): every request, whatever the
// client spoke, goes over HTTP/2, which carries gRPC's trailers and
// streams. One connection multiplexes many streams, so the pool stays
// small.
//
// ping > 0 pings a connection silent that long and closes it, ending every
// stream on it, when no answer comes within ping or 15 s, whichever is
// shorter: an app whose host vanished without a word (a node gone, a
// partition) is noticed then, not when TCP keepalive gives up minutes
// later. It is off by default because grpc-go servers take a client ping
// sent within 5 minutes of the last one as a strike and after three end
// the whole connection (GOAWAY too_many_pings), cutting every caller's
// stream on it; an app must permit pings that often first.
//
// Each stream takes at most upstreamStreamWindow bytes from the app ahead
// of its client.
func NewH2CTransport(ping time.Duration) *http.Transport {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2 := &http.HTTP2Config{MaxReceiveBufferPerStream: upstreamStreamWindow}
	if ping > 0 {
		h2.SendPingTimeout, h2.PingTimeout = ping, min(ping, maxPingTimeout)
	}
	return &http.Transport{
		HTTP2:           h2,
		Protocols:       &protos,
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout: 90 * time.Second,
		// As NewTransport: an upload sent with "Expect: 100-continue" is
		// told to continue by the app, not by us before the app has seen
		// it (the client's body would race an early refusal).
		ExpectContinueTimeout: time.Second,
		// As NewTransport: the client's Accept-Encoding, or none, reaches
		// the app, and bodies pass compressed as it sent them.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxUpstreamHeaderBytes,
	}
}

// upstreamStreamWindow is the HTTP/2 flow-control window the proxy gives
// each stream from an h2c app: what the app may send ahead of what the
// client has taken, held in the proxy's memory. Go's default, 4 MiB, let
// a client that stops reading (an HTTP/2 window of 0, or a gRPC client
// that never calls Recv) pin 4 MiB a stream for as long as it stays: two
// connections of 250 streams took a verifier to 2.13 GB; with 256 KiB,
// 175 MB. The price is bulk speed: one 300 MB download over loopback ran
// at 243-358 MB/s, against 425-510 with 4 MiB and 189-268 with 64 KiB.
// The connection's window stays Go's 1 GiB: one shared by all streams
// would let stalled streams stop every other client's on the same
// upstream connection. 4,096 stalled streams still do, on an app that
// allows that many on one connection (Go's client opens at most 1,000 on
// one that says nothing, as grpc-go's default).
const upstreamStreamWindow = 256 << 10

// maxPingTimeout bounds how long an unanswered ping keeps a connection.
const maxPingTimeout = 15 * time.Second

// ServerProtocols are the protocols the proxy's listener speaks: HTTP/1.1
// and HTTP/2 with prior knowledge (h2c), which gRPC clients use, on the
// same port. An HTTP/1.1 "Upgrade: h2c" is never honoured (see upgrade.go).
func ServerProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}
