// Package ratelimit owns the issuer's request limits: the GCRA algorithm
// (generic cell rate algorithm), the named limits and their defaults, and
// what happens when the counter store fails. It knows nothing of HTTP: the
// transport asks Allow before any business work and renders the Decision.
//
// Why GCRA: its whole state per key is one timestamp (the theoretical
// arrival time, TAT; the stores on the caller's clock also keep the latest
// time a check ran at, so that time never goes back for a key), so a check
// is a single atomic read-modify-write that a database does in one
// statement; it is exact (no window-boundary bursts of
// up to twice the limit as with fixed windows, no approximation as with a
// sliding-window counter), spreads a quota evenly over its period while still
// allowing a burst of the whole count, and yields Retry-After and the reset
// time directly from the stored TAT.
//
// Login: bounding guessing without handing the owner's account to whoever
// can send requests. A limit per email alone lets anyone lock the owner out:
// ten wrong passwords from anywhere, then one every 90 s, and the owner's
// correct password is refused too. So login has three limits, all taken
// before the password is hashed (every attempt that passes them costs one
// argon2id hash, right or wrong, which is why attempts are counted rather
// than failures; counting failures would also need the outcome, so a burst
// of concurrent guesses would all be hashed before the first was counted):
//
//   - [Login], per client address: one address's guesses over all accounts.
//   - [LoginEmailClient], per (email, client address) pair: the tight limit.
//     An attacker elsewhere spends only his own pairs' quota, never the
//     owner's.
//   - [LoginEmail], per email across every address: a much looser ceiling
//     that bounds a distributed guesser (a botnet, an IPv6 prefix). A
//     ceiling alone could again be exhausted by a botnet, so a client
//     address remembered for the account ([KnownLoginClient]: it logged in
//     to it, or completed a password reset for it, within [RememberFor])
//     passes the ceiling anyway; the tighter limits still apply to it. An
//     owner on a new address while the ceiling is exhausted resets the
//     password: a completed reset proves control of the mailbox, clears the
//     email's ceiling and the resetting address's pair, and remembers that
//     address.
//
// What remains: an attacker behind the owner's own address (one NAT) shares
// the owner's pair, so he can slow the owner to the pair's rate; and the
// ceiling's total is what a distributed guesser gets.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limit names (API.md section 7).
const (
	Register            = "register"
	Login               = "login"
	LoginEmail          = "login_email"
	LoginEmailClient    = "login_email_client"
	Refresh             = "refresh"
	PasswordChange      = "password_change"
	PasswordForgot      = "password_forgot"
	PasswordForgotEmail = "password_forgot_email"
	PasswordReset       = "password_reset"
	EmailVerify         = "email_verify"
)

// KnownLoginClient names the marks of client addresses that logged in to an
// account (subject: LoginSubject of its email and the address). It is not a
// limit: it cannot be configured, and Remember and Remembered use it.
const KnownLoginClient = "login_known_client"

// RememberFor is how long a mark lasts at least after the latest Remember.
const RememberFor = 30 * 24 * time.Hour

// LoginSubject is the subject of the per-(email, client address) counters
// and marks. A client address never contains a space, so the pair is
// unambiguous.
func LoginSubject(email, client string) string { return client + " " + email }

// Limit allows Count requests per Period for one key, as a burst or spread
// out.
type Limit struct {
	Count  int
	Period time.Duration
}

func (l Limit) String() string { return fmt.Sprintf("%d/%s", l.Count, l.Period) }

// micros is the limit in a TATStore's whole microseconds: GCRA's
// emission interval (the cost of one request), rounded up, and the period
// that holds Count of them. A limit thus never passes more than its
// count: with the interval rounded down, 1000000/1.5s (1.5 µs each) would
// let 1.5 million through at once. The period grows by less than Count
// µs, and only when Period / Count is not a whole number of microseconds.
func (l Limit) micros() (interval, period int64) {
	perCount := int64(l.Count) * int64(time.Microsecond)
	interval = (int64(l.Period) + perCount - 1) / perCount
	return interval, interval * int64(l.Count)
}

// Policy is what a limit does when its counter store fails.
type Policy int

// The policies.
const (
	// FailOpen counts the request in the replica's own memory instead (see
	// localCounts): for limits whose endpoint is not a guessing target,
	// where refusing service is the worse outcome.
	FailOpen Policy = iota
	// FailClosed refuses the request (the transport answers 503): for limits
	// that stand between an attacker and a guessable secret.
	FailClosed
)

func (p Policy) String() string {
	if p == FailClosed {
		return "closed"
	}
	return "open"
}

// Spec is a named limit with its failure policy.
type Spec struct {
	Limit
	OnStoreError Policy
}

// Defaults are the documented defaults. Per client address unless the name
// says otherwise: login_email and password_forgot_email per normalized
// email, login_email_client per (email, client address) pair,
// password_change per user. Limits guarding a secret someone could guess
// (passwords, reset and verification tokens) fail closed; the others fail
// open.
//
// password_forgot_email caps the reset mails one address receives. Its
// interval (period / count) stays below the reset link's lifetime (30 min):
// when someone else spends an account's quota, the newest of the mails
// their requests sent is still a valid link in the owner's mailbox.
func Defaults() map[string]Spec {
	return map[string]Spec{
		Register:            {Limit{10, time.Hour}, FailOpen},
		Login:               {Limit{30, time.Minute}, FailClosed},
		LoginEmail:          {Limit{50, time.Hour}, FailClosed},
		LoginEmailClient:    {Limit{10, 15 * time.Minute}, FailClosed},
		Refresh:             {Limit{60, time.Minute}, FailOpen},
		PasswordChange:      {Limit{10, 15 * time.Minute}, FailClosed},
		PasswordForgot:      {Limit{5, 15 * time.Minute}, FailOpen},
		PasswordForgotEmail: {Limit{3, time.Hour}, FailOpen},
		PasswordReset:       {Limit{10, 15 * time.Minute}, FailClosed},
		EmailVerify:         {Limit{10, 15 * time.Minute}, FailClosed},
	}
}

// Names lists the limit names in a stable order.
func Names() []string {
	names := make([]string, 0, len(Defaults()))
	for n := range Defaults() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParseOverride parses NAME=COUNT/PERIOD, e.g. "login=10/1m".
func ParseOverride(s string) (string, Limit, error) {
	name, rate, ok := strings.Cut(s, "=")
	if !ok {
		return "", Limit{}, fmt.Errorf("rate limit %q: want NAME=COUNT/PERIOD", s)
	}
	name = strings.TrimSpace(name)
	if _, known := Defaults()[name]; !known {
		return "", Limit{}, fmt.Errorf("rate limit %q: unknown name %q (known: %s)", s, name, strings.Join(Names(), ", "))
	}
	count, period, ok := strings.Cut(rate, "/")
	if !ok {
		return "", Limit{}, fmt.Errorf("rate limit %q: want NAME=COUNT/PERIOD", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 1 || n > 1_000_000 {
		return "", Limit{}, fmt.Errorf("rate limit %q: count must be a whole number from 1 to 1000000", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(period))
	if err != nil || d < time.Second || d > 7*24*time.Hour {
		return "", Limit{}, fmt.Errorf("rate limit %q: period must be a duration from 1s to 168h", s)
	}
	return name, Limit{Count: n, Period: d}, nil
}

// Store keeps the limits' counters and the marks, shared by whoever uses
// the same store: in this process ([Memory]), in the database (a [TATStore]
// behind [NewGCRA]) or in Redis (package redisstore).
type Store interface {
	Counters
	Marks
}

// Counters does GCRA steps.
type Counters interface {
	// Take atomically does one GCRA step of l for key: it counts one request
	// and reports whether it fits. A refused request changes nothing. now is
	// the caller's clock; a store that keeps one clock for every replica
	// (Redis: the server's) uses that one instead.
	Take(ctx context.Context, key string, l Limit, now time.Time) (Result, error)
	// Reset forgets key, counter or mark: its next take finds the whole
	// quota. Forgetting an absent key is not an error.
	Reset(ctx context.Context, key string) error
}

// Marks remembers keys for a while (see [Limiter.Remember]).
type Marks interface {
	// Mark marks key for at least ttl from now.
	Mark(ctx context.Context, key string, now time.Time, ttl time.Duration) error
	// Marked reports whether key is marked at now.
	Marked(ctx context.Context, key string, now time.Time) (bool, error)
}

// Result is what one Take reports.
type Result struct {
	Allowed    bool
	Remaining  int           // requests that would still pass right now
	RetryAfter time.Duration // when refused: how long until one request passes
	ResetAfter time.Duration // how long until the whole quota is available again
}

// Decision is the outcome of one check.
type Decision struct {
	Allowed    bool
	Limit      int           // the limit's count
	Remaining  int           // requests that would still pass right now
	ResetAt    time.Time     // when the whole quota is available again
	RetryAfter time.Duration // when refused: how long until one request passes
}

// ErrStore reports that the counter store failed and the limit fails closed.
var ErrStore = errors.New("ratelimit: counter store unavailable")

// ErrBusy, from a Store, reports that it could not start the call: every
// connection it may use stayed busy for the whole of its timeout. That is
// the issuer's own overload, not the store failing, and every limit then
// refuses the request (Allow returns ErrStore), fail-open ones included:
// letting those through would let any client pass them by sending enough
// requests at once. Against a Redis 50 ms away, 100 concurrent
// forgot-password requests from one address got 1,935 of 2,000 through a
// limit of 5, and 893 reset mails went to one account in 2.3 s.
var ErrBusy = errors.New("ratelimit: every counter-store connection busy")

// Limiter checks the named limits against one Store.
type Limiter struct {
	store     Store
	local     *localCounts // the fail-open limits' count while store fails
	failLogs  map[string]*failLog
	specs     map[string]Spec
	now       func() time.Time
	log       *slog.Logger
	decisions *prometheus.CounterVec
	failures  *prometheus.CounterVec
}

// New returns a Limiter with the defaults, overridden by overrides
// (NAME=COUNT/PERIOD each). Its counters are registered with reg when it is
// not nil.
func New(st Store, overrides []string, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) (*Limiter, error) {
	specs := Defaults()
	var errs []error
	for _, o := range overrides {
		name, l, err := ParseOverride(o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := specs[name]
		s.Limit = l
		specs[name] = s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	l := &Limiter{
		store: st, local: newLocalCounts(maxLocalKeys), failLogs: map[string]*failLog{}, specs: specs, now: now, log: log,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_rate_limit_decisions_total", Help: "Rate-limit checks by limit and outcome (allowed, limited).",
		}, []string{"limit", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "issuer_rate_limit_store_errors_total", Help: "Rate-limit checks whose counter store failed, by limit and what the limit did (open: allowed, closed: refused).",
		}, []string{"limit", "fail"}),
	}
	for name := range specs {
		l.failLogs[name] = new(failLog)
	}
	if reg != nil {
		if err := errors.Join(reg.Register(l.decisions), reg.Register(l.failures)); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// FailFast makes ctx, and every context derived from it
// (context.WithoutCancel included), one request to the store: once one of
// its calls has found the store failing, its further calls fail at once,
// as store failures, and each limit's policy applies. A request checked
// against three limits, then remembered after its login, so waits on a
// Redis that is down or hangs one timeout, not one per call, while a
// healthy Redis that is far away costs each call its round trip and
// nothing more. A ctx that already is one request stays that request.
func (l *Limiter) FailFast(ctx context.Context) context.Context {
	if ctx.Value(oneRequestKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, oneRequestKey{}, new(oneRequest))
}

// oneRequest records whether a call of the request found the store
// failing, and whether that was ErrBusy. A handler may make calls at once,
// hence the atomics.
type oneRequest struct{ storeFailed, busy atomic.Bool }

type oneRequestKey struct{}

// ErrStoreFailedBefore is the store failure of a call made after another
// call of its request (FailFast) found the store failing.
var ErrStoreFailedBefore = errors.New("ratelimit: an earlier call of this request found the counter store failing")

// storeCall runs the store call fn, unless an earlier call of ctx's request
// found the store failing, and records whether fn does. The caller's own
// end (a client that hung up) is not the store's failure.
func storeCall(ctx context.Context, fn func() error) error {
	req, _ := ctx.Value(oneRequestKey{}).(*oneRequest)
	if req == nil {
		return fn()
	}
	if req.storeFailed.Load() {
		if req.busy.Load() {
			return fmt.Errorf("%w: %w", ErrStoreFailedBefore, ErrBusy)
		}
		return ErrStoreFailedBefore
	}
	err := fn()
	if err != nil && ctx.Err() == nil {
		req.busy.Store(errors.Is(err, ErrBusy))
		req.storeFailed.Store(true)
	}
	return err
}

// Spec returns the named limit as configured.
func (l *Limiter) Spec(name string) (Spec, bool) {
	s, ok := l.specs[name]
	return s, ok
}

// Allow counts one request of the named limit for subject (a client address,
// a normalized email). When the store fails it logs, tells the observer and
// then either counts the request in the replica's own memory (fail open)
// or returns ErrStore (fail closed).
//
// A call whose ctx ended (a client that hung up) returns ctx's error
// instead: the store did not fail, and letting such a call through
// uncounted would let any client pass the fail-open limits by hanging up
// once its body is sent.
func (l *Limiter) Allow(ctx context.Context, name, subject string) (Decision, error) {
	spec, ok := l.specs[name]
	if !ok {
		return Decision{}, fmt.Errorf("ratelimit: unknown limit %q", name)
	}
	now := l.now()
	var r Result
	err := storeCall(ctx, func() (err error) {
		r, err = l.store.Take(ctx, counterKey(name, spec.Limit, subject), spec.Limit, now)
		return err
	})
	if err != nil && ctx.Err() != nil {
		return Decision{}, fmt.Errorf("ratelimit: %s not checked: %w", name, ctx.Err())
	}
	if err != nil {
		return l.storeFailed(ctx, name, subject, spec, now, err)
	}
	return l.decide(name, spec, now, r), nil
}

// storeFailed decides a check whose store call failed with err. A
// fail-closed limit refuses the request (ErrStore), and so does every
// limit when the store was busy (ErrBusy); a fail-open one counts it in
// the replica's own localCounts instead, or, when those are full, lets it
// through uncounted: refusing every subject they do not hold let one
// client who filled them (50,000 register requests from the /64s of one
// /48, in 5 s) turn every new client's refresh away for minutes.
func (l *Limiter) storeFailed(ctx context.Context, name, subject string, spec Spec, now time.Time, err error) (Decision, error) {
	policy := spec.OnStoreError
	if errors.Is(err, ErrBusy) {
		policy = FailClosed
	}
	var r Result
	if policy == FailOpen {
		var lerr error
		if r, lerr = l.local.take(counterKey(name, spec.Limit, subject), spec.Limit, now); lerr != nil {
			r = Result{Allowed: true, Remaining: spec.Count}
			err = fmt.Errorf("%w; this replica's own counts: %w", err, lerr)
		}
	}
	if n, due := l.failLogs[name].due(); due {
		l.log.ErrorContext(ctx, "rate limit store failed", "limit", name, "fail", policy.String(), "err", err, "unlogged_before", n)
	}
	l.failures.WithLabelValues(name, policy.String()).Inc()
	if policy == FailClosed {
		return Decision{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return l.decide(name, spec, now, r), nil
}

// failLog says one limit's store failures at most once per failLogEvery;
// the metric counts every one. A line per failure was a line per request
// while the store was down: 100,574 lines, 23.7 MB, for 50,000 requests.
type failLog struct {
	last   atomic.Int64 // Unix nanoseconds of the latest line
	unsaid atomic.Int64 // failures since it
}

// failLogEvery is the most often one limit's store failures are logged.
const failLogEvery = time.Second

// due reports whether a failure is to be logged now and, if so, how many
// were not since the latest line.
func (f *failLog) due() (int64, bool) {
	now, last := time.Now().UnixNano(), f.last.Load()
	if now-last < int64(failLogEvery) || !f.last.CompareAndSwap(last, now) {
		f.unsaid.Add(1)
		return 0, false
	}
	return f.unsaid.Swap(0), true
}

// decide turns a take's result into the Decision, and counts it.
func (l *Limiter) decide(name string, spec Spec, now time.Time, r Result) Decision {
	d := Decision{Allowed: r.Allowed, Limit: spec.Count, Remaining: r.Remaining, ResetAt: now.Add(r.ResetAfter)}
	if !r.Allowed {
		d.Remaining, d.RetryAfter = 0, r.RetryAfter
	}
	outcome := "allowed"
	if !d.Allowed {
		outcome = "limited"
	}
	l.decisions.WithLabelValues(name, outcome).Inc()
	return d
}

// Reset forgets subject's counter of the named limit (or mark): its next
// request finds the whole quota.
func (l *Limiter) Reset(ctx context.Context, name, subject string) error {
	k := key(name, subject) // a mark's
	if spec, ok := l.specs[name]; ok {
		k = counterKey(name, spec.Limit, subject)
	} else if name != KnownLoginClient {
		return fmt.Errorf("ratelimit: unknown limit %q", name)
	}
	if err := storeCall(ctx, func() error { return l.store.Reset(ctx, k) }); err != nil {
		return fmt.Errorf("ratelimit: reset %s: %w", name, err)
	}
	return nil
}

// Remember marks subject under the named mark for at least RememberFor
// from now.
func (l *Limiter) Remember(ctx context.Context, mark, subject string) error {
	if mark != KnownLoginClient {
		return fmt.Errorf("ratelimit: unknown mark %q", mark)
	}
	if err := storeCall(ctx, func() error { return l.store.Mark(ctx, key(mark, subject), l.now(), RememberFor) }); err != nil {
		return fmt.Errorf("ratelimit: remember %s: %w", mark, err)
	}
	return nil
}

// Remembered reports whether subject carries the named mark.
func (l *Limiter) Remembered(ctx context.Context, mark, subject string) (bool, error) {
	if mark != KnownLoginClient {
		return false, fmt.Errorf("ratelimit: unknown mark %q", mark)
	}
	var ok bool
	err := storeCall(ctx, func() (err error) {
		ok, err = l.store.Marked(ctx, key(mark, subject), l.now())
		return err
	})
	if err != nil && ctx.Err() != nil {
		return false, fmt.Errorf("ratelimit: %s not read: %w", mark, ctx.Err())
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return ok, nil
}

// counterKey names a subject's counter of the named limit lim, the limit
// in it: a limit changed starts its counters afresh. Under the name alone
// a limit loosened from 20/1h to 10/2s kept refusing, with a Retry-After
// of nearly an hour, every subject the old one had used up, until the old
// period ran out (found by a probe). Replicas that disagree on a limit,
// during a rolling change, count apart.
func counterKey(name string, lim Limit, subject string) string {
	return key(name+"@"+lim.String(), subject)
}

// key names a subject's counter or mark. Subjects are hashed so that the
// counter table holds no email address or client address in clear.
func key(name, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return name + ":" + hex.EncodeToString(sum[:16])
}

// Seconds rounds a duration up to whole seconds, at least 1: what
// Retry-After says.
func Seconds(d time.Duration) int64 {
	s := int64(math.Ceil(d.Seconds()))
	return max(s, 1)
}

// Sweeper is a store whose expired counters must be deleted: one that,
// unlike Redis, does not expire keys itself.
type Sweeper interface {
	// Sweep forgets every counter and mark that has expired at now.
	Sweep(ctx context.Context, now time.Time) (int64, error)
}

// Sweep forgets expired counters every interval until ctx ends.
func Sweep(ctx context.Context, st Sweeper, every time.Duration, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := st.Sweep(ctx, now()); err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "rate limit sweep failed", "err", err)
				}
			} else if n > 0 {
				log.DebugContext(ctx, "rate limit counters swept", "count", n)
			}
		}
	}
}
