package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults of RevocationOptions.
const (
	defaultRevocationPoll      = 5 * time.Second
	defaultRevocationStaleness = time.Minute
	defaultRevocationEntries   = 100_000
	defaultRevocationBodyBytes = 32 << 20
)

// ErrRevocationsOverflow is what a refresh of a RevocationSource returns,
// wrapped, when applying the answer would hold more than MaxEntries
// entries. The answer is not applied: the last list stays, and its
// staleness grows until the list fits again.
var ErrRevocationsOverflow = errors.New("verify: revocation list exceeds its maximum size")

// RevocationOptions tune a RevocationSource. The zero value of each field
// means its default.
type RevocationOptions struct {
	// PollInterval is how often the feed is asked for changes. Zero means
	// 5 seconds.
	PollInterval time.Duration
	// MaxStaleness is how long the list may go without a successful
	// refresh before it counts as stale. Zero means one minute.
	MaxStaleness time.Duration
	// FailClosed makes a Verifier refuse every token (ReasonRevocationsStale)
	// while the list is stale, or has never loaded. Without it a stale list
	// still refuses what it holds, and signatures decide the rest.
	FailClosed bool
	// MaxEntries bounds the sessions and keys held together. An answer that
	// would exceed it is not applied (see ErrRevocationsOverflow). Zero
	// means 100000.
	MaxEntries int
	// MaxBodyBytes refuses a larger answer. Zero means 32 MiB.
	MaxBodyBytes int64
	// FetchTimeout bounds one request, whatever Client allows. Zero means
	// 10 seconds.
	FetchTimeout time.Duration
	// Client fetches the feed. Nil means a client of the default transport.
	Client *http.Client
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per failed refresh and per change of the
	// list. Nil means no logging.
	Logger *slog.Logger
	// OnRefresh, if set, is called after every refresh with its outcome:
	// a hook for metrics. It must not block.
	OnRefresh func(err error)
}

// RevocationSource holds the issuer's revocation list (API.md section 8),
// kept current by polling the feed: the sessions (sid) and signing keys
// (kid) whose tokens must be refused although their signature is good. A
// Verifier consults it through Config.Revocations. It is safe for
// concurrent use.
//
// The first request asks for the whole list; later ones ask only for the
// changes since the cursor of the last answer, with If-None-Match, so an
// unchanged list costs a 304. A delta the feed refuses (400, 404, 410: a
// cursor it no longer knows) is followed at once by a request for the
// whole list. Polls are single-flight: Refresh joins a poll under way.
//
// A failed refresh (an HTTP error, another status, a body too large or not
// the feed's format, an overflow) keeps the last good list. An entry is
// dropped once its until has passed, since no token it could refuse is
// valid by then; MaxEntries bounds the rest. Lookups take no lock: the
// list is an immutable snapshot behind an atomic pointer, replaced whole.
type RevocationSource struct {
	url        string
	client     *http.Client
	timeout    time.Duration
	interval   time.Duration
	staleAfter time.Duration
	failClosed bool
	maxEntries int
	maxBytes   int64
	now        func() time.Time
	log        *slog.Logger
	onRefresh  func(error)

	cur    atomic.Pointer[revocationSet]
	lastOK atomic.Int64 // UnixNano of the last successful refresh; 0: never
	sf     singleflight.Group

	mu       sync.Mutex
	droppers []func(kids []string) // told about every newly revoked kid
	reported string                // the last refresh error logged, to log each once

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// revocationSet is one state of the list. It is never modified after it
// is published.
type revocationSet struct {
	sessions map[string]time.Time // sid -> until
	keys     map[string]time.Time // kid -> until
	cursor   string               // where the next delta starts; "" asks for the whole list
	etag     string
	minUntil time.Time // the earliest until held; zero when empty
}

func (rs *revocationSet) len() int {
	if rs == nil {
		return 0
	}
	return len(rs.sessions) + len(rs.keys)
}

// NewRevocationSource returns a RevocationSource over the feed at rawURL
// and starts polling it, until ctx is done or Close is called. It does not
// wait for the first answer (call Refresh for that); it fails only for an
// unusable URL or options.
func NewRevocationSource(ctx context.Context, rawURL string, opts RevocationOptions) (*RevocationSource, error) {
	s, err := newRevocationSource(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	s.wg.Go(s.run)
	return s, nil
}

// newRevocationSource builds the source without starting its loop, which
// tests drive by hand.
func newRevocationSource(ctx context.Context, rawURL string, opts RevocationOptions) (*RevocationSource, error) {
	errs := sourceOptionErrors("revocation", rawURL, []namedDuration{
		{"revocation poll interval", opts.PollInterval}, {"revocation max staleness", opts.MaxStaleness},
		{"revocation fetch timeout", opts.FetchTimeout},
	}, []namedSize{
		{"max revocation entries", int64(opts.MaxEntries)}, {"max revocation body size", opts.MaxBodyBytes},
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &RevocationSource{
		url:        rawURL,
		client:     opts.Client,
		timeout:    orDefault(opts.FetchTimeout, defaultFetchTimeout),
		interval:   orDefault(opts.PollInterval, defaultRevocationPoll),
		staleAfter: orDefault(opts.MaxStaleness, defaultRevocationStaleness),
		failClosed: opts.FailClosed,
		maxEntries: orDefault(opts.MaxEntries, defaultRevocationEntries),
		maxBytes:   orDefault(opts.MaxBodyBytes, defaultRevocationBodyBytes),
		now:        opts.Now,
		log:        opts.Logger,
		onRefresh:  opts.OnRefresh,
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

// Close stops polling and waits for a poll under way. The list already
// loaded is still consulted. Close always returns nil.
func (s *RevocationSource) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Ready reports whether a list has been loaded. Once true it stays true.
func (s *RevocationSource) Ready() bool { return s.lastOK.Load() != 0 }

// LoadedAt returns when the list was last refreshed successfully (a 304
// included), or the zero time before the first success.
func (s *RevocationSource) LoadedAt() time.Time {
	n := s.lastOK.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Staleness returns how long ago the list was last refreshed successfully,
// and false while none has ever loaded.
func (s *RevocationSource) Staleness() (time.Duration, bool) {
	n := s.lastOK.Load()
	if n == 0 {
		return 0, false
	}
	return max(s.now().Sub(time.Unix(0, n)), 0), true
}

// Stale reports whether the list has gone without a successful refresh
// for longer than MaxStaleness, or has never loaded.
func (s *RevocationSource) Stale() bool { return s.staleAt(s.now()) }

// Len returns how many sessions and keys the list holds.
func (s *RevocationSource) Len() int { return s.cur.Load().len() }

// FailClosed reports whether a stale list refuses every token.
func (s *RevocationSource) FailClosed() bool { return s.failClosed }

// Refresh polls the feed now and waits for the outcome, or for ctx. A poll
// already under way is joined rather than repeated.
func (s *RevocationSource) Refresh(ctx context.Context) error {
	ch := s.sf.DoChan("poll", func() (any, error) { return nil, s.load() })
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SessionRevoked reports whether the list holds sid.
func (s *RevocationSource) SessionRevoked(sid string) bool {
	rs := s.cur.Load()
	if rs == nil || sid == "" {
		return false
	}
	_, ok := rs.sessions[sid]
	return ok
}

// KeyRevoked reports whether the list holds kid.
func (s *RevocationSource) KeyRevoked(kid string) bool {
	rs := s.cur.Load()
	if rs == nil {
		return false
	}
	_, ok := rs.keys[kid]
	return ok
}

func (s *RevocationSource) staleAt(now time.Time) bool {
	n := s.lastOK.Load()
	return n == 0 || now.Sub(time.Unix(0, n)) > s.staleAfter
}

// refusal returns why a token with kid and sid must be refused at now, or
// "". It is the Verifier's hot path: one atomic load and two map lookups,
// plus a clock comparison in fail-closed mode.
func (s *RevocationSource) refusal(kid, sid string, now time.Time) Reason {
	if r := s.cur.Load().lookup(kid, sid); r != "" {
		return r
	}
	if s.failClosed && s.staleAt(now) {
		return ReasonRevocationsStale
	}
	return ""
}

// refusalCached is refusal for a cached token, which remembers in clear
// the last list it was found absent from: lists are immutable, so while
// that one is current the lookups are skipped.
func (s *RevocationSource) refusalCached(clear *atomic.Pointer[revocationSet], kid, sid string, now time.Time) Reason {
	if rs := s.cur.Load(); rs != nil && clear.Load() != rs {
		if r := rs.lookup(kid, sid); r != "" {
			return r
		}
		clear.Store(rs)
	}
	if s.failClosed && s.staleAt(now) {
		return ReasonRevocationsStale
	}
	return ""
}

// lookup returns why rs refuses a token with kid and sid, or "".
func (rs *revocationSet) lookup(kid, sid string) Reason {
	if rs == nil {
		return ""
	}
	if _, ok := rs.keys[kid]; ok {
		return ReasonKeyRevoked
	}
	if _, ok := rs.sessions[sid]; ok && sid != "" {
		return ReasonSessionRevoked
	}
	return ""
}

// onKeysRevoked registers fn to be told of every kid that enters the list,
// and at once of those already on it. A Verifier registers its key source,
// which then drops those keys from its set.
func (s *RevocationSource) onKeysRevoked(fn func(kids []string)) {
	s.mu.Lock()
	s.droppers = append(s.droppers, fn)
	s.mu.Unlock()
	if rs := s.cur.Load(); rs != nil && len(rs.keys) > 0 {
		kids := make([]string, 0, len(rs.keys))
		for kid := range rs.keys {
			kids = append(kids, kid)
		}
		fn(kids)
	}
}

func (s *RevocationSource) run() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		_ = s.Refresh(s.life) // load logs and reports the outcome
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
	}
}

// load polls the feed once and installs the outcome. Only Refresh calls
// it, through the single flight, so loads never overlap.
func (s *RevocationSource) load() error {
	old := s.cur.Load()
	next, changed, err := s.poll(old)
	now := s.now()
	if err == nil {
		next, changed = next.pruned(now, changed)
		if next.len() > s.maxEntries {
			err = fmt.Errorf("%w: %d entries, at most %d", ErrRevocationsOverflow, next.len(), s.maxEntries)
		}
	}
	if s.newOutcome(err) {
		if err != nil {
			s.log.Warn("revocation list refresh failed; keeping the last good list", "url", s.url, "err", err, "ready", s.Ready(), "entries", old.len())
		} else if old != nil {
			s.log.Info("revocation list refreshed again", "url", s.url)
		}
	}
	if err == nil {
		var revoked []string
		for kid := range next.keys {
			if _, had := old.keysOrNil()[kid]; !had {
				revoked = append(revoked, kid)
			}
		}
		if changed {
			s.cur.Store(next)
		}
		s.lastOK.Store(now.UnixNano())
		if len(revoked) > 0 {
			s.mu.Lock()
			droppers := s.droppers
			s.mu.Unlock()
			for _, fn := range droppers {
				fn(revoked)
			}
			s.log.Warn("signing keys revoked", "kids", revoked)
		}
		switch {
		case old == nil:
			s.log.Info("revocation list loaded", "url", s.url, "sessions", len(next.sessions), "keys", len(next.keys))
		case changed && next.len() != old.len():
			s.log.Debug("revocation list changed", "url", s.url, "sessions", len(next.sessions), "keys", len(next.keys))
		}
	}
	if s.onRefresh != nil {
		s.onRefresh(err)
	}
	return err
}

// newOutcome reports whether err differs from the last refresh's outcome,
// so that a feed that stays down is logged once, not at every poll.
func (s *RevocationSource) newOutcome(err error) bool {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := msg != s.reported
	s.reported = msg
	return changed
}

func (rs *revocationSet) keysOrNil() map[string]time.Time {
	if rs == nil {
		return nil
	}
	return rs.keys
}

// pruned drops the entries whose until has passed, building a new set only
// when there is one; changed carries through, or turns true.
func (rs *revocationSet) pruned(now time.Time, changed bool) (*revocationSet, bool) {
	if rs.minUntil.IsZero() || now.Before(rs.minUntil) {
		return rs, changed
	}
	n := &revocationSet{
		sessions: make(map[string]time.Time, len(rs.sessions)),
		keys:     make(map[string]time.Time, len(rs.keys)),
		cursor:   rs.cursor,
		etag:     rs.etag,
	}
	for sid, until := range rs.sessions {
		n.add(n.sessions, sid, until, now)
	}
	for kid, until := range rs.keys {
		n.add(n.keys, kid, until, now)
	}
	return n, true
}

// add records id until until in m, a map of rs, unless until has passed;
// a later until wins over an earlier one.
func (rs *revocationSet) add(m map[string]time.Time, id string, until, now time.Time) {
	if !until.After(now) {
		return
	}
	if u, ok := m[id]; ok && !until.After(u) {
		return
	}
	m[id] = until
	if rs.minUntil.IsZero() || until.Before(rs.minUntil) {
		rs.minUntil = until
	}
}

// revocationFeed is the feed's answer (API.md section 8).
type revocationFeed struct {
	Sessions []struct {
		SID   string    `json:"sid"`
		Until time.Time `json:"until"`
	} `json:"sessions"`
	Keys []struct {
		KID   string    `json:"kid"`
		Until time.Time `json:"until"`
	} `json:"keys"`
	Cursor string `json:"cursor"`
}

// check refuses an answer that is not a revocation list: one without the
// sessions and keys arrays or a cursor. JSON decoding alone takes null,
// {} or any other object (a --revocation-url naming the wrong document,
// the issuer's discovery document say) for an empty list, and a verifier
// so configured, fail-closed or not, let every logged-out token through
// while it reported a fresh list.
func (f *revocationFeed) check() error {
	if f.Sessions == nil || f.Keys == nil || f.Cursor == "" {
		return errors.New("fetch revocations: the answer is not a revocation list: it needs the sessions and keys arrays and a cursor")
	}
	return nil
}

// poll asks for the changes since old (everything when old is nil or has
// no cursor) and returns the list they make; changed is false for a 304.
// A delta the feed refuses is followed at once by a full request.
func (s *RevocationSource) poll(old *revocationSet) (*revocationSet, bool, error) {
	if old != nil && old.cursor != "" {
		next, changed, status, err := s.fetch(old)
		switch status {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusGone:
			s.log.Info("revocation feed refused the cursor; fetching the whole list", "url", s.url, "status", status)
		default:
			return next, changed, err
		}
	}
	next, changed, _, err := s.fetch(nil)
	return next, changed, err
}

// fetch runs one request: a delta on base, or the whole list when base is
// nil. status is the answer's, 0 when there was none.
func (s *RevocationSource) fetch(base *revocationSet) (next *revocationSet, changed bool, status int, err error) {
	ctx, cancel := context.WithTimeout(s.life, s.timeout)
	defer cancel()
	u := s.url
	if base != nil {
		pu, err := url.Parse(s.url)
		if err != nil {
			return nil, false, 0, fmt.Errorf("fetch revocations: %w", err)
		}
		q := pu.Query()
		q.Set("after", base.cursor)
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, 0, fmt.Errorf("fetch revocations: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if base != nil && base.etag != "" {
		req.Header.Set("If-None-Match", base.etag)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, false, 0, fmt.Errorf("fetch revocations: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && base != nil:
		return base, false, resp.StatusCode, nil
	case resp.StatusCode != http.StatusOK:
		return nil, false, resp.StatusCode, fmt.Errorf("fetch revocations: status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return nil, false, resp.StatusCode, fmt.Errorf("fetch revocations: read body: %w", err)
	}
	if int64(len(b)) > s.maxBytes {
		return nil, false, resp.StatusCode, fmt.Errorf("fetch revocations: body exceeds %d bytes", s.maxBytes)
	}
	var feed revocationFeed
	if err := json.Unmarshal(b, &feed); err != nil {
		return nil, false, resp.StatusCode, fmt.Errorf("fetch revocations: %w", err)
	}
	if err := feed.check(); err != nil {
		return nil, false, resp.StatusCode, err
	}
	// Refused before anything is built: a feed of a million entries
	// costs no more than its bytes.
	if n := len(feed.Sessions) + len(feed.Keys); n > s.maxEntries {
		return nil, false, resp.StatusCode, fmt.Errorf("%w: %d entries, at most %d", ErrRevocationsOverflow, n, s.maxEntries)
	}
	next, err = mergeFeed(base, &feed, resp.Header.Get("ETag"), s.now())
	if err != nil {
		return nil, false, resp.StatusCode, err
	}
	return next, true, resp.StatusCode, nil
}

// mergeFeed builds the set an answer makes: base (nil for a full list)
// with feed's entries added, those expired at now left out.
func mergeFeed(base *revocationSet, feed *revocationFeed, etag string, now time.Time) (*revocationSet, error) {
	next := &revocationSet{
		sessions: make(map[string]time.Time, len(feed.Sessions)+len(base.sessionsOrNil())),
		keys:     make(map[string]time.Time, len(feed.Keys)+len(base.keysOrNil())),
		cursor:   feed.Cursor,
		etag:     etag,
	}
	if base != nil {
		for sid, until := range base.sessions {
			next.add(next.sessions, sid, until, now)
		}
		for kid, until := range base.keys {
			next.add(next.keys, kid, until, now)
		}
		if next.cursor == "" {
			next.cursor = base.cursor
		}
	}
	for _, e := range feed.Sessions {
		if e.SID == "" || e.Until.IsZero() {
			return nil, errors.New("fetch revocations: a session without sid or until")
		}
		next.add(next.sessions, e.SID, e.Until, now)
	}
	for _, e := range feed.Keys {
		if e.KID == "" || e.Until.IsZero() {
			return nil, errors.New("fetch revocations: a key without kid or until")
		}
		next.add(next.keys, e.KID, e.Until, now)
	}
	return next, nil
}

func (rs *revocationSet) sessionsOrNil() map[string]time.Time {
	if rs == nil {
		return nil
	}
	return rs.sessions
}
