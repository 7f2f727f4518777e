package httpserver

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// HeaderRequestID is the header that carries the request id both ways.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLen bounds an incoming id so a client cannot bloat every log
// line of its request.
const maxRequestIDLen = 128

type requestIDKey struct{}

// RequestID gives every request an id: a valid incoming X-Request-Id is kept,
// anything else is replaced by a fresh UUIDv7. The id is set on the response
// header before next runs (so even a panic's 500 carries it), on the request
// header (so a proxy forwards the id it logged, never the client's invalid
// one) and in the context for RequestIDFromContext.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		r.Header.Set(HeaderRequestID, id)
		next.ServeHTTP(w, r)
	})
}

// RequestIDFromContext returns the id RequestID stored in ctx, or "" when the
// request did not pass through RequestID.
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID accepts 1 to 128 characters of [A-Za-z0-9._:-]: enough for
// UUIDs and the ids of common proxies and tracers, and nothing that could
// break a log line or a header.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds,
// then random bits from crypto/rand. It is built on the stack rather than
// with uuid.NewV7, whose reader interface puts every id on the heap: the
// string is this per-request step's only allocation.
func newRequestID() string {
	var u uuid.UUID
	_, _ = rand.Read(u[6:]) // never fails: crypto/rand crashes the program instead
	ms := uint64(time.Now().UnixMilli())
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	return u.String()
}
