package httpserver

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The client-chosen fields of an access line are bounded, so that no
// request makes its line much longer than another's: a 64 KiB path of
// NULs made a 130 KB line (each escaped to six bytes), and a flood of them
// pushed other requests' lines out of a slow log output.
const (
	maxUserAgentLen = 256
	maxPathLen      = 1024
	maxMethodLen    = 32
)

// clip is s cut to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// AccessLog writes one line per request once the handler returns: Info, or
// Error for a 5xx other than 501. It records only the path, never the query string, headers
// or bodies, because those may carry tokens and passwords.
//
// A gRPC call's line also carries its grpc_status: its HTTP status is 200
// whether the call succeeded or not. A line whose answer was cut off
// carries "aborted": true: the handler ended with a panic (an answer an
// upstream broke off ends with http.ErrAbortHandler) or ClientGone, and
// the server dropped the connection or reset the stream, so the status
// and bytes are what had gone out, not a complete answer.
//
// AccessLog belongs inside RequestID (for the id) and outside Recover (so a
// recovered panic is logged with the 500 the client got); a panic that does
// get through is still logged before it travels on.
func AccessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorderFor(w)
		returned := false
		defer func() {
			status := rec.finalStatus(!returned)
			level := slog.LevelInfo
			// 501 says what the client asked for is not served here (a
			// CONNECT, say): an ERROR line any client could make at will.
			if status >= 500 && status != http.StatusNotImplemented {
				level = slog.LevelError
			}
			id := RequestIDFromContext(r.Context())
			if id == "" {
				// Outside RequestID: the id is on the response by now.
				id = w.Header().Get(HeaderRequestID)
			}
			attrs := [...]slog.Attr{
				slog.String("method", clip(r.Method, maxMethodLen)),
				slog.String("path", clip(r.URL.Path, maxPathLen)),
				slog.Int("status", status),
				slog.Int64("bytes", rec.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.String("request_id", id),
				slog.String("remote_addr", r.RemoteAddr),
				slog.String("user_agent", clip(r.UserAgent(), maxUserAgentLen)),
				{}, // grpc_status, for a gRPC call that ended with one
				{}, // aborted, for an answer cut off
			}
			n := len(attrs) - 2
			if code, ok := grpcStatus(r, w.Header()); ok {
				attrs[n] = slog.Int("grpc_status", code)
				n++
			}
			if !returned || rec.gone {
				attrs[n] = slog.Bool("aborted", true)
				n++
			}
			logger.LogAttrs(r.Context(), level, "request", attrs[:n]...)
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}

// IsGRPC reports whether a request is a gRPC call (gRPC-Web's included),
// whose client reads a refusal only from grpc-status. Media types are
// case-insensitive: "Application/GRPC" is one too.
func IsGRPC(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= len("application/grpc") && strings.EqualFold(ct[:len("application/grpc")], "application/grpc")
}

// grpcStatus is the status a gRPC call ended with: in the header of a
// trailers-only answer (the verifier's own refusals), or in a trailer,
// which a handler sets in the header map after the body, under its
// announced name or with http.TrailerPrefix.
func grpcStatus(r *http.Request, h http.Header) (int, bool) {
	if !IsGRPC(r.Header) {
		return 0, false
	}
	v, ok := h["Grpc-Status"]
	if !ok {
		v, ok = h[http.TrailerPrefix+"Grpc-Status"]
	}
	if !ok || len(v) == 0 {
		return 0, false
	}
	code, err := strconv.Atoi(v[0])
	return code, err == nil
}
