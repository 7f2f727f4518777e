package issuerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// Limiter decides whether a request may proceed (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, name, subject string) (ratelimit.Decision, error)
	Reset(ctx context.Context, name, subject string) error
	Remember(ctx context.Context, mark, subject string) error
	Remembered(ctx context.Context, mark, subject string) (bool, error)
	FailFast(ctx context.Context) context.Context
}

// rateRule is one rate limit of a route (route.limits): the named limit,
// whose counter is kept per subject, and what a request over it gets.
type rateRule struct {
	name string
	per  subject
	over overLimit
}

// subject is what a limit's counter is kept for.
type subject int

const (
	// perClient: the client address.
	perClient subject = iota
	// perEmail: the normalized email of the JSON body. A body without one
	// is not counted; the handler refuses it.
	perEmail
	// perEmailClient: the pair of the body's email and the client address.
	perEmailClient
	// perUser: the authenticated caller; checked after authentication, so
	// only on protected routes.
	perUser
)

// overLimit is what a request over a limit gets.
type overLimit int

const (
	// refuse answers 429 before the handler runs.
	refuse overLimit = iota
	// quiet lets the handler answer as usual, but told (throttled) to do
	// nothing: for forgot-password, whose answer must not change.
	quiet
	// refuseUnlessKnown refuses, unless the client address is remembered
	// for the body's email (ratelimit.KnownLoginClient): the per-email
	// login ceiling, which attackers elsewhere must not be able to turn
	// into a lockout of the owner.
	refuseUnlessKnown
)

// throttledKey marks a request that is over a quiet limit.
type throttledKey struct{}

// throttled reports whether r is over one of its route's quiet limits: the
// handler answers as it always does and does nothing else.
func throttled(r *http.Request) bool {
	return r.Context().Value(throttledKey{}) != nil
}

// limit puts rules in front of next. It runs before the handler reads the
// body or the service touches the database, so a refused request costs
// counter updates and nothing else. The answer carries the X-RateLimit-*
// headers of the tightest limit that let it through (quiet ones and a
// ceiling a known client passed are not shown).
func (a *API) limit(rules []rateRule, next http.Handler) http.Handler {
	if len(rules) == 0 || a.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One request to the store: after a failing call, these checks
		// and the login's Remember or the reset's clearing after fail at
		// once.
		if ctx := a.limiter.FailFast(r.Context()); ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		client := a.ip.Client(r)
		var (
			email    string
			readBody bool
			shown    *ratelimit.Decision
		)
		for _, rule := range rules {
			var subj string
			switch rule.per {
			case perClient:
				subj = client
			case perUser:
				subj = identity(r).Subject
			case perEmail, perEmailClient:
				if !readBody {
					var release func()
					email, release = a.peekEmail(r)
					defer release()
					readBody = true
				}
				if email == "" {
					continue
				}
				subj = email
				if rule.per == perEmailClient {
					subj = ratelimit.LoginSubject(email, client)
				}
			}
			d, err := a.limiter.Allow(r.Context(), rule.name, subj)
			if err != nil {
				a.writeLimitError(w, r, err)
				return
			}
			if !d.Allowed {
				switch rule.over {
				case quiet:
					r = r.WithContext(context.WithValue(r.Context(), throttledKey{}, rule.name))
					continue
				case refuseUnlessKnown:
					known, err := a.limiter.Remembered(r.Context(), ratelimit.KnownLoginClient, ratelimit.LoginSubject(email, client))
					if err != nil {
						a.writeLimitError(w, r, err)
						return
					}
					if known {
						continue
					}
				}
				a.refuse(w, r, d)
				return
			}
			if rule.over != quiet && (shown == nil || d.Remaining < shown.Remaining) {
				shown = &d
			}
		}
		if shown != nil {
			setRateLimitHeaders(w.Header(), *shown)
		}
		next.ServeHTTP(w, r)
	})
}

// writeLimitError answers a request whose limit could not be checked: 503
// when a fail-closed limit's store is down or any limit's store is too busy
// (ratelimit.ErrBusy), 499 (writeError) when the
// client hung up.
func (a *API) writeLimitError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ratelimit.ErrStore) {
		a.writeError(w, r, apperr.Wrap(apperr.KindUnavailable, "rate_limit_unavailable", "The service cannot check its request limits right now; retry shortly.", err))
		return
	}
	a.writeError(w, r, apperr.Internal(err))
}

// refuse answers a request over a limit: 429 with Retry-After.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, d ratelimit.Decision) {
	setRateLimitHeaders(w.Header(), d)
	w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.Seconds(d.RetryAfter), 10))
	a.writeError(w, r, apperr.New(apperr.KindRateLimited, "rate_limited", "Too many requests; retry after the time in Retry-After."))
}

// loggedIn remembers the client address of a successful login for the
// account, so that it passes the per-email login ceiling from then on. A
// failure is logged: the login itself has succeeded.
func (a *API) loggedIn(r *http.Request, email string) {
	if a.limiter == nil {
		return
	}
	subj := ratelimit.LoginSubject(auth.NormalizeEmail(email), a.ip.Client(r))
	ctx, cancel := afterCommit(r)
	defer cancel()
	if err := a.limiter.Remember(ctx, ratelimit.KnownLoginClient, subj); err != nil {
		a.log.WarnContext(r.Context(), "rate limit: remembering the login's client failed", "err", err)
	}
}

// passwordReset clears the login limits of the account whose password was
// reset: whoever completed the reset proved control of its mailbox. The
// email's ceiling and the resetting address's pair start over, and that
// address is remembered for the account. Counters of other addresses stay:
// they are someone else's guesses.
func (a *API) passwordReset(r *http.Request, email string) {
	if a.limiter == nil {
		return
	}
	email = auth.NormalizeEmail(email)
	pair := ratelimit.LoginSubject(email, a.ip.Client(r))
	ctx, cancel := afterCommit(r)
	defer cancel()
	err := errors.Join(
		a.limiter.Reset(ctx, ratelimit.LoginEmail, email),
		a.limiter.Reset(ctx, ratelimit.LoginEmailClient, pair),
		a.limiter.Remember(ctx, ratelimit.KnownLoginClient, pair),
	)
	if err != nil {
		a.log.WarnContext(r.Context(), "rate limit: clearing the login limits after a password reset failed", "err", err)
	}
}

// afterCommit is the context of what the limiter is told once a login or a
// reset has happened. The client hanging up does not end it: that would
// leave the owner's address unremembered, or the owner behind the ceiling
// the reset cleared. A bound does, since nothing else would end a call to
// a database that hangs (a Redis call has its own timeout).
func afterCommit(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), afterCommitTimeout)
}

const afterCommitTimeout = 5 * time.Second

// splitLimits separates the rules checked before authentication from the
// per-user ones checked after it. A per-user rule on an unprotected route
// is a mistake in the route table.
func splitLimits(rt route) (before, after []rateRule) {
	for _, rule := range rt.limits {
		if rule.per != perUser {
			before = append(before, rule)
			continue
		}
		if !rt.protected {
			panic(fmt.Sprintf("issuerapi: route %s limits %s per user but is not protected", rt.pattern, rule.name))
		}
		after = append(after, rule)
	}
	return before, after
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
// untouched for the handler, which then judges it as usual (a body read
// whole is handed over as it is). It reads at most one byte past the body
// limit. release gives up the buffer once the request is done.
func (a *API) peekEmail(r *http.Request) (email string, release func()) {
	if !isJSON(r.Header.Get("Content-Type")) {
		return "", func() {}
	}
	buf, release, err := a.bodies.read(r.Body, r.ContentLength, a.cfg.MaxBodyBytes)
	if err != nil || int64(len(buf)) > a.cfg.MaxBodyBytes {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		return "", release
	}
	r.Body = &peekedBody{ReadCloser: r.Body, body: buf}
	var req struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(buf, &req) != nil || req.Email == "" {
		return "", release
	}
	return auth.NormalizeEmail(req.Email), release
}
