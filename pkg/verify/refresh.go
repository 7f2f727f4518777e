package verify

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// When a RemoteSource fetches: its schedule, and the memory of unknown
// kids that keeps it from fetching.

// backoff is the delay before the next attempt after n failures in a row.
func (s *RemoteSource) backoff(n int) time.Duration {
	limit := max(retryCap, s.minR)
	d := retryBase
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// refreshDelay turns the response's caching headers into the delay before
// the next fetch: 80% of the remaining freshness, so the set is replaced
// before it goes stale, clamped to [MinRefresh, MaxRefresh].
func (s *RemoteSource) refreshDelay(h http.Header) time.Duration {
	d, ok := freshness(h)
	switch {
	case !ok:
		d = s.defR
	case d < 0: // no-store, no-cache
		d = retryCap
	default:
		d = d / 5 * 4
	}
	return min(max(d, s.minR), s.maxR)
}

// freshness returns max-age minus Age (RFC 9111 section 4.2), -1 when the
// response forbids caching, or false when it does not say.
func freshness(h http.Header) (time.Duration, bool) {
	const maxSeconds = 1 << 31 // keeps the Duration from overflowing
	age, found := int64(0), false
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return -1, true
			case "max-age":
				if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 {
					age, found = min(n, maxSeconds), true
				}
			}
		}
	}
	if !found {
		return 0, false
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(h.Get("Age")), 10, 64); err == nil && n > 0 {
		age = max(age-n, 0)
	}
	return time.Duration(age) * time.Second, true
}

// negCache remembers kids that a fetch did not bring, until a deadline.
// Lookups take no lock. When full it starts over: a flood of distinct
// kids is already bounded by the refetch interval.
type negCache struct {
	m    sync.Map // kid -> deadline in UnixNano
	n    atomic.Int64
	size int64
}

// maxNegKidLen keeps absurd kids out of the negative cache, so that its
// memory stays bounded by size, not by what tokens carry.
const maxNegKidLen = 256

func (c *negCache) has(kid string, now time.Time) bool {
	v, ok := c.m.Load(kid)
	return ok && now.UnixNano() < v.(int64)
}

func (c *negCache) add(kid string, until time.Time) {
	if len(kid) > maxNegKidLen {
		return
	}
	if c.n.Add(1) > c.size {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(kid, until.UnixNano())
}
