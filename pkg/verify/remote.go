package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"golang.org/x/sync/singleflight"
)

// Defaults of RemoteOptions and FileOptions.
const (
	defaultMinRefresh        = time.Second
	defaultMaxRefresh        = time.Hour
	defaultRefresh           = 5 * time.Minute
	defaultKidRefetch        = 10 * time.Second
	defaultNegativeCacheTTL  = 30 * time.Second
	defaultNegativeCacheSize = 1024
	defaultMaxSetBytes       = 1 << 20
	defaultFetchTimeout      = 10 * time.Second
)

// retryBase is the first delay after a failed fetch; it doubles with each
// further failure up to retryCap (or MinRefresh, when that is longer).
const retryBase = time.Second

// retryCap bounds the backoff after failed fetches, and is how soon a set
// served with no-store or no-cache is asked for again: often enough to
// recover fast, rarely enough that a fleet of verifiers does not hammer an
// issuer that is down or forbids caching.
const retryCap = 30 * time.Second

// RemoteOptions tune a RemoteSource. The zero value of each field means its
// default.
type RemoteOptions struct {
	// Client fetches the set. Nil means a client of the default transport.
	Client *http.Client
	// FetchTimeout bounds one fetch, whatever Client allows. Zero means
	// 10 seconds.
	FetchTimeout time.Duration
	// MinRefresh and MaxRefresh clamp the refresh interval. The set is
	// refreshed after 80% of the max-age of the issuer's Cache-Control, so
	// it never goes stale: the issuer's signing-key schedule relies on
	// that (a new key is published max-age before it signs), so the
	// floor is low. no-store and no-cache mean 30 seconds, as does the
	// longest backoff between failed fetches, which starts at one second.
	// Zero means one second and one hour.
	MinRefresh, MaxRefresh time.Duration
	// DefaultRefresh is the interval when the response has no max-age.
	// Zero means 5 minutes.
	DefaultRefresh time.Duration
	// UnknownKidRefetchInterval spaces the fetches that an unknown kid
	// triggers: at most one per interval, shared by all concurrent
	// lookups. Zero means 10 seconds.
	UnknownKidRefetchInterval time.Duration
	// NegativeCacheTTL is how long a kid that a fetch did not bring is
	// refused without asking again; NegativeCacheSize bounds how many such
	// kids are remembered. Zero means 30 seconds and 1024.
	NegativeCacheTTL  time.Duration
	NegativeCacheSize int
	// MaxSetBytes refuses a larger response. Zero means 1 MiB.
	MaxSetBytes int64
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per failed fetch and per changed set. Nil
	// means no logging.
	Logger *slog.Logger
	// OnRefresh, if set, is called after every fetch with its outcome: a
	// hook for metrics. It must not block.
	OnRefresh func(err error)
}

// RemoteSource is a KeySource over a JWK set fetched from a URL, kept fresh
// in the background. It is safe for concurrent use.
//
// The first fetch runs in the background and need not succeed: until a set
// has loaded, Ready is false and every lookup fails with an error wrapping
// ErrNotReady. A failed fetch (an HTTP error, a status other than 200, a
// body that is too large, not a JWK set, or holds no usable key) keeps the
// last good set and is retried with backoff.
//
// An unknown kid triggers one fetch, shared by all concurrent lookups, at
// most once per UnknownKidRefetchInterval; a kid that is still unknown
// after a fetch is refused without further fetching for NegativeCacheTTL,
// so a flood of forged kids costs neither fetches nor locks.
type RemoteSource struct {
	url       string
	client    *http.Client
	timeout   time.Duration
	minR      time.Duration
	maxR      time.Duration
	defR      time.Duration
	kidEvery  time.Duration
	negTTL    time.Duration
	maxBytes  int64
	now       func() time.Time
	log       *slog.Logger
	onRefresh func(error)

	cur atomic.Pointer[keySet]
	neg negCache
	sf  singleflight.Group

	// lastKid is when the last kid-triggered fetch started (UnixNano);
	// inKid is true while it runs.
	lastKid atomic.Int64
	inKid   atomic.Bool

	mu       sync.Mutex
	next     time.Time // when the background loop fetches next
	failures int       // consecutive failed fetches
	dropped  droppedKids

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ KeySource   = (*RemoteSource)(nil)
	_ entrySource = (*RemoteSource)(nil)
)

// NewRemoteSource returns a RemoteSource over the JWK set at rawURL and
// starts its background refresh, which runs until ctx is done or Close is
// called. It does not wait for the first fetch (call Refresh for that); it
// fails only for an unusable URL or options.
func NewRemoteSource(ctx context.Context, rawURL string, opts RemoteOptions) (*RemoteSource, error) {
	s, err := newRemoteSource(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	s.wg.Go(s.run)
	return s, nil
}

// newRemoteSource builds the source without starting its loop, which
// tests drive by hand.
func newRemoteSource(ctx context.Context, rawURL string, opts RemoteOptions) (*RemoteSource, error) {
	errs := sourceOptionErrors("jwk set", rawURL, []namedDuration{
		{"fetch timeout", opts.FetchTimeout}, {"min refresh", opts.MinRefresh}, {"max refresh", opts.MaxRefresh},
		{"default refresh", opts.DefaultRefresh}, {"unknown kid refetch interval", opts.UnknownKidRefetchInterval},
		{"negative cache ttl", opts.NegativeCacheTTL},
	}, []namedSize{
		{"negative cache size", int64(opts.NegativeCacheSize)}, {"max set size", opts.MaxSetBytes},
	})
	s := &RemoteSource{
		url:       rawURL,
		client:    opts.Client,
		timeout:   orDefault(opts.FetchTimeout, defaultFetchTimeout),
		minR:      orDefault(opts.MinRefresh, defaultMinRefresh),
		maxR:      orDefault(opts.MaxRefresh, defaultMaxRefresh),
		defR:      orDefault(opts.DefaultRefresh, defaultRefresh),
		kidEvery:  orDefault(opts.UnknownKidRefetchInterval, defaultKidRefetch),
		negTTL:    orDefault(opts.NegativeCacheTTL, defaultNegativeCacheTTL),
		maxBytes:  orDefault(opts.MaxSetBytes, defaultMaxSetBytes),
		now:       opts.Now,
		log:       opts.Logger,
		onRefresh: opts.OnRefresh,
	}
	s.neg.size = int64(orDefault(opts.NegativeCacheSize, defaultNegativeCacheSize))
	if s.minR > s.maxR {
		errs = append(errs, fmt.Errorf("verify: min refresh %v exceeds max refresh %v", s.minR, s.maxR))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.client == nil {
		s.client = &http.Client{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.life, s.cancel = context.WithCancel(ctx)
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close stops the background refresh and waits for it to end. Keys already
// loaded are still served. Close always returns nil.
func (s *RemoteSource) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Ready reports whether a key set has been loaded. Once true it stays true:
// a failed fetch keeps the last good set.
func (s *RemoteSource) Ready() bool { return s.cur.Load() != nil }

// LoadedAt returns when the current key set was fetched, or the zero time
// before the first success; for a key-set age metric.
func (s *RemoteSource) LoadedAt() time.Time { return s.cur.Load().loadedAtOrZero() }

// Refresh fetches the set now and waits for the outcome, or for ctx. A
// fetch already under way is joined rather than repeated.
func (s *RemoteSource) Refresh(ctx context.Context) error { return s.fetchShared(ctx) }

// Key returns the key with kid, fetching the set again first when kid is
// unknown (within the limits described on RemoteSource).
func (s *RemoteSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	e, err := s.entry(ctx, kid)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

func (s *RemoteSource) lookup(kid string) *keyEntry { return lookupIn(s.cur.Load(), kid) }

func (s *RemoteSource) entry(ctx context.Context, kid string) (*keyEntry, error) {
	if ks := s.cur.Load(); ks != nil {
		if e, err, found := ks.find(kid); found {
			return e, err
		}
	}
	now := s.now()
	if s.neg.has(kid, now) {
		return nil, fmt.Errorf("%w (not in the set at the last fetch)", ErrUnknownKey)
	}
	fetched, ferr := s.refetchForKid(ctx)
	ks := s.cur.Load()
	if ks == nil {
		if ferr != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotReady, ferr)
		}
		return nil, ErrNotReady
	}
	if e, err, found := ks.find(kid); found {
		return e, err
	}
	if ferr != nil {
		return nil, fmt.Errorf("%w (refetch failed: %w)", ErrUnknownKey, ferr)
	}
	if fetched {
		s.neg.add(kid, now.Add(s.negTTL))
	}
	return nil, ErrUnknownKey
}

// refetchForKid fetches the set for an unknown kid unless one such fetch
// started within the interval; concurrent callers share one fetch. fetched
// reports whether the caller waited for a fetch that succeeded or failed.
func (s *RemoteSource) refetchForKid(ctx context.Context) (fetched bool, err error) {
	// lastKid is read before inKid, and a fetch sets inKid before lastKid:
	// so a recent lastKid with inKid false means that fetch has finished and
	// its set is installed, and the caller's re-check will see it. This
	// path takes no lock, which is what a flood of forged kids hits.
	if s.kidFetchRecent() && !s.inKid.Load() {
		return false, nil
	}
	ch := s.sf.DoChan("kid", func() (any, error) {
		if s.kidFetchRecent() {
			return false, nil
		}
		s.inKid.Store(true)
		defer s.inKid.Store(false)
		s.lastKid.Store(s.now().UnixNano())
		return true, s.fetchShared(s.life)
	})
	select {
	case r := <-ch:
		fetched, _ = r.Val.(bool)
		return fetched, r.Err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (s *RemoteSource) kidFetchRecent() bool {
	last := s.lastKid.Load()
	return last != 0 && s.now().Sub(time.Unix(0, last)) < s.kidEvery
}

// fetchShared runs one fetch, or joins the one under way, and waits for it
// or for ctx. The fetch itself runs under the source's own context, so a
// caller that gives up does not cancel it for the others.
func (s *RemoteSource) fetchShared(ctx context.Context) error {
	ch := s.sf.DoChan("fetch", func() (any, error) { return nil, s.load() })
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// load fetches the set, installs it if good, and schedules the next
// background fetch. Only fetchShared calls it, so loads never overlap.
func (s *RemoteSource) load() error {
	old := s.cur.Load()
	ks, delay, err := s.fetch(s.life, old)
	now := s.now()
	s.mu.Lock()
	if err != nil {
		s.failures++
		delay = s.backoff(s.failures)
	} else {
		s.failures = 0
		ks.loadedAt = now
		ks = s.dropped.apply(ks)
		s.cur.Store(ks)
	}
	s.next = now.Add(delay)
	s.mu.Unlock()

	switch {
	case err != nil:
		s.log.Warn("jwk set fetch failed; keeping the last good set", "url", s.url, "err", err, "ready", old != nil, "retry_in", delay)
	case old == nil || !maps.EqualFunc(old.keys, ks.keys, func(a, b *keyEntry) bool { return a == b }):
		s.log.Info("jwk set loaded", "url", s.url, "keys", len(ks.keys), "unusable", len(ks.bad), "next_refresh_in", delay)
	}
	if s.onRefresh != nil {
		s.onRefresh(err)
	}
	return err
}

// fetch gets and parses the set; delay is when to fetch it again.
func (s *RemoteSource) fetch(ctx context.Context, old *keySet) (ks *keySet, delay time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch jwk set: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch jwk set: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetch jwk set: status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("fetch jwk set: read body: %w", err)
	}
	if int64(len(b)) > s.maxBytes {
		return nil, 0, fmt.Errorf("fetch jwk set: body exceeds %d bytes", s.maxBytes)
	}
	if ks, err = parseKeySet(b, old); err != nil {
		return nil, 0, fmt.Errorf("fetch jwk set: %w", err)
	}
	return ks, s.refreshDelay(resp.Header), nil
}

// refreshIfDue fetches when the scheduled time has come; the background
// loop calls it, and tests with an injected clock.
func (s *RemoteSource) refreshIfDue(ctx context.Context) (bool, error) {
	if s.now().Before(s.nextRefresh()) {
		return false, nil
	}
	return true, s.fetchShared(ctx)
}

// nextRefresh returns when the background loop fetches next; the zero time
// before the first fetch.
func (s *RemoteSource) nextRefresh() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// minWait keeps the loop from spinning should the schedule lie in the
// past.
const minWait = 100 * time.Millisecond

func (s *RemoteSource) run() {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
		_, _ = s.refreshIfDue(s.life) // load logs and reports the outcome
		d := max(s.nextRefresh().Sub(s.now()), minWait)
		// Up to 10% earlier, so that many verifiers restarted together
		// do not keep fetching in step. Not a secret: math/rand is fine.
		d -= rand.N(d/10 + 1)
		t.Reset(d)
	}
}
