package httpserver

import (
	"log/slog"
	"net/http"
	"time"
)

// maxUserAgentLen bounds the client-chosen user agent in the log.
const maxUserAgentLen = 256

// AccessLog writes one line per request once the handler returns: Info, or
// Error for a 5xx. It records only the path, never the query string, headers
// or bodies, because those may carry tokens and passwords.
//
// AccessLog belongs inside RequestID (for the id) and outside Recover (so a
// recovered panic is logged with the 500 the client got); a panic that does
// get through is still logged before it travels on.
func AccessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := newResponseRecorder(w)
		returned := false
		defer func() {
			status := rec.finalStatus(!returned)
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			id := RequestIDFromContext(r.Context())
			if id == "" {
				// Outside RequestID: the id is on the response by now.
				id = w.Header().Get(HeaderRequestID)
			}
			ua := r.UserAgent()
			if len(ua) > maxUserAgentLen {
				ua = ua[:maxUserAgentLen]
			}
			logger.LogAttrs(r.Context(), level, "request",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int64("bytes", rec.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.String("request_id", id),
				slog.String("remote_addr", r.RemoteAddr),
				slog.String("user_agent", ua),
			)
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}
