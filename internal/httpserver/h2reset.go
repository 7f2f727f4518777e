package httpserver

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxH2Streams is how many streams a client may have open on one HTTP/2
// connection: nginx's default, and what Go's server defaults to at least.
// Go's server runs a handler for each and queues up to four times as many
// more; at its 250, 20 connections opening and resetting streams in a
// loop ("rapid reset") held the verifier at 698 MB.
const maxH2Streams = 100

// A connection on which more than half of the streams, once
// resetJudgedAfter have ended, were reset by the client within
// prematureReset of their start is closed: Envoy's premature-reset
// check. Rapid reset costs the server a stream, a request and a handler
// for each pair of frames the client sends; closed, the client must
// connect again.
const (
	resetJudgedAfter = 100
	prematureReset   = time.Second
)

// resetCount counts one connection's streams and those its client reset.
type resetCount struct {
	streams, resets atomic.Int64
	close           sync.Once
}

// countResets runs h for each of conn's streams, and tells conn to go
// away (GOAWAY: the streams begun finish, no new one starts, so the client
// connects again) once its client has reset more than half of them early.
// A stream reset before its handler has begun is not run at all: its
// client is gone, and its answer (and access log line) would go nowhere.
// The count is taken as the handler ends, panicking included: a handler
// whose client left ends with http.ErrAbortHandler, and resets made
// while the handlers ran went uncounted.
func (conn *h2cConn) countResets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			n, k := conn.resets.streams.Add(1), conn.resets.resets.Load()
			if r.Context().Err() != nil && time.Since(start) < prematureReset {
				k = conn.resets.resets.Add(1)
			}
			if n >= resetJudgedAfter && 2*k > n {
				conn.resets.close.Do(func() { go conn.goAway() })
			}
		}()
		if r.Context().Err() == nil {
			h.ServeHTTP(w, r)
		}
	})
}
