package httpserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/palisade-auth/palisade/internal/problem"
)

// Recover turns a panic in next into a 500 internal_error problem that says
// nothing about the cause, and logs the panic value and stack at Error. The
// request itself is not logged: it may carry credentials.
//
// http.ErrAbortHandler is re-panicked untouched: it is how a handler asks
// net/http to drop the connection quietly. A panic after the response header
// went out is logged and then becomes an abort too, because finishing the
// response normally would hand the client a truncated body that looks
// complete.
func Recover(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorderFor(w)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			logger.LogAttrs(r.Context(), slog.LevelError, "panic",
				slog.String("panic", fmt.Sprint(v)),
				slog.String("stack", string(debug.Stack())),
				slog.String("request_id", RequestIDFromContext(r.Context())),
			)
			if rec.written() {
				panic(http.ErrAbortHandler)
			}
			problem.Write(w, problem.Internal())
		}()
		next.ServeHTTP(rec, r)
	})
}
