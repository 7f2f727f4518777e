package issuerapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/problem"
)

// statusOf is the issuer's one table from error kind to HTTP status.
var statusOf = map[apperr.Kind]int{
	apperr.KindInternal:         http.StatusInternalServerError,
	apperr.KindMalformed:        http.StatusBadRequest,
	apperr.KindInvalid:          http.StatusBadRequest,
	apperr.KindUnprocessable:    http.StatusUnprocessableEntity,
	apperr.KindUnauthenticated:  http.StatusUnauthorized,
	apperr.KindForbidden:        http.StatusForbidden,
	apperr.KindNotFound:         http.StatusNotFound,
	apperr.KindConflict:         http.StatusConflict,
	apperr.KindRateLimited:      http.StatusTooManyRequests,
	apperr.KindUnavailable:      http.StatusServiceUnavailable,
	apperr.KindTooLarge:         http.StatusRequestEntityTooLarge,
	apperr.KindUnsupportedMedia: http.StatusUnsupportedMediaType,
	apperr.KindTimeout:          http.StatusRequestTimeout,
}

// writeError renders err as problem+json. The public code and message go to
// the client; the cause goes to the log only, and only for our own faults.
// A database outage anywhere in err's chain is 503 with Retry-After
// (auth.Classify), whichever handler met it. An err that is the request's
// own context ending (its client hung up while a query ran) is no fault:
// 499, for the access log alone.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if ctxErr := r.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		httpserver.ClientGone(w)
		return
	}
	e := auth.Classify(err)
	status, ok := statusOf[e.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		a.log.ErrorContext(r.Context(), "request failed", "code", e.Code, "err", e.Err, "path", httpserver.LogPath(r.URL.Path))
	}
	if status == http.StatusUnauthorized && e.Code == auth.CodeInvalidToken {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(1))
	}
	problem.Write(w, problem.Problem{Status: status, Code: e.Code, Detail: e.Message, Errors: e.Fields})
}
