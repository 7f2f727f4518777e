package issuerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// Limiter decides whether a request may proceed (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, name, subject string) (ratelimit.Decision, error)
}

// routeLimits names the limit of each limited route, keyed by client
// address. Login is also limited per email (see limit).
var routeLimits = map[string]string{
	"POST /v1/register":            ratelimit.Register,
	"POST /v1/login":               ratelimit.Login,
	"POST /v1/refresh":             ratelimit.Refresh,
	"POST /v1/password/forgot":     ratelimit.PasswordForgot,
	"POST /v1/password/reset":      ratelimit.PasswordReset,
	"POST /v1/email/verify":        ratelimit.EmailVerify,
	"POST /v1/email/verify/resend": ratelimit.EmailVerify,
}

// limit puts the route's rate limit in front of next. It runs before the
// handler reads the body or the service touches the database, so a refused
// request costs one counter update and nothing else.
func (a *API) limit(pattern string, next http.Handler) http.Handler {
	name, ok := routeLimits[pattern]
	if !ok || a.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := a.check(w, r, name, a.ip.String(r))
		if !ok {
			return
		}
		if name == ratelimit.Login {
			// Per email as well, against guessing one account's password
			// from many addresses. An unreadable body has no email to count;
			// the handler will refuse it anyway.
			if email := a.peekEmail(r); email != "" {
				de, ok := a.check(w, r, ratelimit.LoginEmail, email)
				if !ok {
					return
				}
				if de.Remaining < d.Remaining {
					d = de
				}
			}
		}
		setRateLimitHeaders(w.Header(), d)
		next.ServeHTTP(w, r)
	})
}

// check counts the request under the named limit and answers it (429, or 503
// when a fail-closed limit's store is down) when it may not proceed.
func (a *API) check(w http.ResponseWriter, r *http.Request, name, subject string) (ratelimit.Decision, bool) {
	d, err := a.limiter.Allow(r.Context(), name, subject)
	if err != nil {
		if errors.Is(err, ratelimit.ErrStore) {
			a.writeError(w, r, apperr.Wrap(apperr.KindUnavailable, "rate_limit_unavailable", "The service cannot check its request limits right now; retry shortly.", err))
		} else {
			a.writeError(w, r, apperr.Internal(err))
		}
		return d, false
	}
	if !d.Allowed {
		setRateLimitHeaders(w.Header(), d)
		w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.Seconds(d.RetryAfter), 10))
		a.writeError(w, r, apperr.New(apperr.KindRateLimited, "rate_limited", "Too many requests; retry after the time in Retry-After."))
		return d, false
	}
	return d, true
}

func setRateLimitHeaders(h http.Header, d ratelimit.Decision) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	// Unix seconds, rounded up: the quota is whole by then.
	reset := d.ResetAt.Unix()
	if d.ResetAt.Nanosecond() > 0 {
		reset++
	}
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
}

// peekEmail reads the normalized email of a JSON body and puts the body back
// untouched for the handler, which then reads, limits and judges it as
// usual. It reads at most one byte past the body limit.
func (a *API) peekEmail(r *http.Request) string {
	if !isJSON(r.Header.Get("Content-Type")) {
		return ""
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, a.cfg.MaxBodyBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	if err != nil || int64(len(buf)) > a.cfg.MaxBodyBytes {
		return ""
	}
	var req struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(buf, &req) != nil || req.Email == "" {
		return ""
	}
	return auth.NormalizeEmail(req.Email)
}
