// Package httpserver owns the HTTP plumbing shared by the issuer and the
// verifier: the server lifecycle with graceful shutdown, the request id, the
// access log, panic recovery, request metrics and the JSON logger.
package httpserver

import (
	"log/slog"
	"net/http"
)

// Chain wraps h in mws so that mws[0] is the outermost: a request passes
// through mws in order before it reaches h.
func Chain(h http.Handler, mws ...func(http.Handler) http.Handler) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Standard wraps h in the middleware every listener needs, in the order that
// makes each one see what it must: RequestID first so every log line has the
// id, AccessLog around Recover so a recovered panic is logged as the 500 the
// client got.
func Standard(logger *slog.Logger, h http.Handler) http.Handler {
	return RequestID(AccessLog(logger, Recover(logger, h)))
}
