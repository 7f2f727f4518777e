package httpserver

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The client-chosen fields of an access line are bounded, as written: in
// JSON, so that a NUL, escaped to six bytes, counts six. A line stays under
// 2 KiB, inside the 4 KiB a pipe takes whole (pipeAtomic), however long the
// request's method, path or user agent: a 64 KiB path of NULs made a 130
// KB line, a flood of them pushed other requests' lines out of a slow log
// output, and clipped by raw bytes a 1 KiB path of NULs still made 6 KiB,
// which two processes sharing a pipe interleaved.
const (
	maxUserAgentLen = 256
	maxPathLen      = 1024
	maxMethodLen    = 32
)

// LogPath is what a log line holds of a request's path: bounded as in
// the access line, for the other lines that name it.
func LogPath(path string) string { return clip(path, maxPathLen) }

// LogMethod is what a log line holds of a request's method.
func LogMethod(method string) string { return clip(method, maxMethodLen) }

// clip is the longest prefix of s whose JSON string escape (as slog's
// JSON handler writes it) takes at most n bytes.
func clip(s string, n int) string {
	width := 0
	for i := 0; i < len(s); {
		w, size := escapedWidth(s[i:])
		if width+w > n {
			return s[:i]
		}
		width += w
		i += size
	}
	return s
}

// escapedWidth is how many bytes the first character of s takes escaped in
// a JSON string, and how many bytes of s it is: a control character six
// (\u00XX; \n, \r and \t take two, counted six), a quote or backslash
// two, a byte that is no UTF-8 six (\ufffd), as are U+2028 and U+2029; any
// other character its own size.
func escapedWidth(s string) (width, size int) {
	if b := s[0]; b < utf8.RuneSelf {
		switch {
		case b == '"' || b == '\\':
			return 2, 1
		case b < 0x20:
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return size, size
}

// AccessLog writes one line per request once the handler returns: Info, or
// Error for a 5xx other than 501. It records only the path, never the query
// string, headers or bodies, because those may carry tokens and passwords.
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
				slog.String("method", LogMethod(r.Method)),
				slog.String("path", LogPath(r.URL.Path)),
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
