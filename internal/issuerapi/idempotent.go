package issuerapi

import (
	"bytes"
	"context"
	"net/http"
	"strconv"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// idempotent runs a body-taking handler under the Idempotency-Key rule. run
// returns the status and value to encode, or an error. Requests without the
// header run as usual. Client errors are remembered like successes (a retry
// would get the same answer); our own failures release the key so a retry
// can succeed.
func (a *API) idempotent(w http.ResponseWriter, r *http.Request, scope string, run func(body []byte) (int, any, error)) {
	body, release, err := a.readBody(w, r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer release()
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		status, v, err := run(body)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		a.writeJSON(w, r, status, v)
		return
	}
	if !idempotency.ValidKey(key) {
		e := errMalformed("The Idempotency-Key header must be 1 to 255 printable ASCII characters.")
		a.writeError(w, r, e)
		return
	}
	ctx := r.Context()
	res, replay, err := a.idem.Begin(ctx, scope, key, idempotency.Fingerprint([]byte(r.Method), []byte(r.URL.Path), body))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if replay != nil {
		w.Header().Set("Idempotent-Replayed", "true")
		contentType := "application/json"
		if replay.Status >= 400 {
			contentType = "application/problem+json"
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(replay.Body)))
		w.WriteHeader(replay.Status)
		_, _ = w.Write(replay.Body)
		return
	}
	// Capture what we send so the exact bytes can be replayed.
	rec := &captureWriter{ResponseWriter: w}
	status, v, err := run(body)
	if err != nil {
		a.writeError(rec, r, err)
	} else {
		a.writeJSON(rec, r, status, v)
	}
	// A client that went away still gets its answer remembered (or its key
	// freed) for its retry.
	ctx = context.WithoutCancel(ctx)
	// No answer to keep: ours failed, or the client left before there
	// was one (httpserver.ClientGone writes nothing, or 499 with no access
	// log around it), and its retry must run afresh.
	if rec.status >= 500 || rec.status == 0 || rec.status == httpserver.StatusClientClosedRequest {
		if rerr := a.idem.Release(ctx, res); rerr != nil {
			a.log.ErrorContext(ctx, "idempotency release", "err", rerr)
		}
		return
	}
	if cerr := a.idem.Complete(ctx, res, idempotency.Response{Status: rec.status, Body: rec.body.Bytes()}); cerr != nil {
		a.log.ErrorContext(ctx, "idempotency complete", "err", cerr)
	}
}

type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *captureWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
	c.ResponseWriter.WriteHeader(s)
}

// Unwrap lets httpserver.ClientGone and http.ResponseController reach the
// writers underneath.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}
