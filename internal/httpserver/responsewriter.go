package httpserver

import (
	"bufio"
	"net"
	"net/http"
)

// responseRecorder passes everything through to the wrapped writer and
// remembers the status and the number of body bytes. It keeps Flush and
// Hijack reachable both by type assertion and through
// http.ResponseController, which follows Unwrap.
type responseRecorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
	gone     bool // set by ClientGone
}

var (
	_ http.Flusher  = (*responseRecorder)(nil)
	_ http.Hijacker = (*responseRecorder)(nil)
)

func newResponseRecorder(w http.ResponseWriter) *responseRecorder {
	return &responseRecorder{ResponseWriter: w}
}

// recorderFor is w when it already records (a Server's handlers, the
// middleware inside one another, get one): one recorder serves them all,
// so a request pays for one.
func recorderFor(w http.ResponseWriter) *responseRecorder {
	if rec, ok := w.(*responseRecorder); ok {
		return rec
	}
	return newResponseRecorder(w)
}

// recorded serves next with a recorder over the connection's writer, and
// drops the connection of a request that ended with ClientGone.
func recorded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := newResponseRecorder(w)
		next.ServeHTTP(rec, r)
		if rec.gone {
			panic(http.ErrAbortHandler)
		}
	})
}

func (r *responseRecorder) WriteHeader(code int) {
	// Informational responses (103 Early Hints) precede the real one, so
	// they are passed on without being taken for the final status; 101 is
	// final because the connection changes protocol after it.
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *responseRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client. Like net/http, it commits a 200
// when nothing was written yet.
func (r *responseRecorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack hands the connection to the handler; from then on the recorder sees
// nothing, so the exchange counts as a protocol switch unless a status was
// already written.
func (r *responseRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.hijacked = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the features of the wrapped
// writer (deadlines, full duplex) that the recorder does not implement.
func (r *responseRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ClientGone ends the request of a client that went away before its
// answer. Served by a Server, the request is logged and counted with
// StatusClientClosedRequest, nothing is written, and once the handler has
// returned the connection is dropped (an HTTP/2 stream reset) instead of
// answered: net/http would otherwise send the status, which is for the
// log alone, to a client that only half-closed its side, or an empty 200
// for a handler that wrote nothing. A status already written stands, in
// the log too. The writer's wrappers must unwrap (Unwrap) down to the
// Server's; a writer with none under it (a test's recorder) is handed
// the status.
func ClientGone(w http.ResponseWriter) {
	found := false
	for u := w; ; {
		if rec, ok := u.(*responseRecorder); ok {
			found = true
			rec.gone = true
			if rec.status == 0 {
				rec.status = StatusClientClosedRequest
			}
		}
		next, ok := u.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		u = next.Unwrap()
	}
	if !found {
		w.WriteHeader(StatusClientClosedRequest)
	}
}

// written reports whether the response header has gone out, after which no
// other status can be sent.
func (r *responseRecorder) written() bool { return r.status != 0 || r.hijacked }

// finalStatus is the status the client got. panicked says the handler did not
// return normally: with nothing written, the server answers such a request
// with 500 (through Recover) or drops it, and 500 is what an operator should
// see either way.
func (r *responseRecorder) finalStatus(panicked bool) int {
	switch {
	case r.status != 0:
		return r.status
	case r.hijacked:
		return http.StatusSwitchingProtocols
	case panicked:
		return http.StatusInternalServerError
	default:
		// A handler that returns without writing gets an empty 200.
		return http.StatusOK
	}
}
