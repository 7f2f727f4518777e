package verify

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tokenCache remembers verified tokens, keyed by the SHA-256 of the token
// so that the token itself is never stored. It is bounded: sharded by the
// first byte of the hash to keep locks short and uncontended, each shard
// holding at most its share of the size and evicting an arbitrary entry
// when full. Entries are cheap to re-create, so nothing smarter pays.
type tokenCache struct {
	shards []cacheShard
	mask   int
	per    int // entries per shard
}

type cacheShard struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*cachedToken
	_  [48]byte // keeps shards on separate cache lines
}

// cachedToken is what a verified token said, and what it was verified with.
type cachedToken struct {
	id  *Identity // never handed out: callers get copies
	kid string
	key *keyEntry
	exp time.Time
	// clear is the last revocation list found not to hold the token.
	clear atomic.Pointer[revocationSet]
}

// minShardEntries keeps shards from being so small that eviction by chance
// throws out hot entries.
const minShardEntries = 64

func newTokenCache(size int) *tokenCache {
	n := 1
	for n < 64 && size/(n*2) >= minShardEntries {
		n *= 2
	}
	c := &tokenCache{shards: make([]cacheShard, n), mask: n - 1, per: size / n}
	for i := range c.shards {
		c.shards[i].m = make(map[[sha256.Size]byte]*cachedToken)
	}
	return c
}

func (c *tokenCache) shard(sum *[sha256.Size]byte) *cacheShard {
	return &c.shards[int(sum[0])&c.mask]
}

func (c *tokenCache) get(sum *[sha256.Size]byte) *cachedToken {
	s := c.shard(sum)
	s.mu.Lock()
	t := s.m[*sum]
	s.mu.Unlock()
	return t
}

func (c *tokenCache) put(sum *[sha256.Size]byte, t *cachedToken) {
	s := c.shard(sum)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[*sum]; !ok && len(s.m) >= c.per {
		for k := range s.m { // map order is unspecified: a random victim
			delete(s.m, k)
			break
		}
	}
	s.m[*sum] = t
}

// remove drops the entry for sum if it is still t.
func (c *tokenCache) remove(sum *[sha256.Size]byte, t *cachedToken) {
	s := c.shard(sum)
	s.mu.Lock()
	if s.m[*sum] == t {
		delete(s.m, *sum)
	}
	s.mu.Unlock()
}

func (c *tokenCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// cached answers for the token with hash sum from the cache; hit is false
// when the full check must run. It gives the remembered identity only
// where the uncached check would accept the token: it has not expired
// under the same rule, the key source still holds the very key that
// verified it (a key that left the set, or was replaced under its kid,
// takes its tokens with it), and the revocation list does not refuse it.
func (v *Verifier) cached(ctx context.Context, sum *[sha256.Size]byte) (id *Identity, e *Error, hit bool) {
	t := v.cache.get(sum)
	if t == nil {
		return nil, nil, false
	}
	now := v.now()
	if !t.exp.Add(v.skew).After(now) || v.currentKey(ctx, t.kid) != t.key {
		v.cache.remove(sum, t)
		return nil, nil, false
	}
	if v.revs != nil {
		if e := revokedError(v.revs.refusalCached(&t.clear, t.kid, t.id.SessionID, now), t.kid, t.id.SessionID); e != nil {
			if e.Reason != ReasonRevocationsStale {
				v.cache.remove(sum, t) // revoked for good
			}
			return nil, e, true
		}
	}
	return cloneIdentity(t.id), nil, true
}

// remember caches a token just verified. A token not yet valid without
// the clock skew is left out, so that a cached answer never depends on
// the skew in the token's favour.
func (v *Verifier) remember(sum *[sha256.Size]byte, id *Identity, kid string, key *keyEntry) {
	now := v.now()
	if id.NotBefore.After(now) || id.IssuedAt.After(now) {
		return
	}
	v.cache.put(sum, &cachedToken{id: cloneIdentity(id), kid: kid, key: key, exp: id.ExpiresAt})
}

// currentKey returns the key the source would verify kid with now, without
// fetching when the source can say so; nil when it has none.
func (v *Verifier) currentKey(ctx context.Context, kid string) *keyEntry {
	if v.lookup != nil {
		return v.lookup.lookup(kid)
	}
	e, err := v.entry(ctx, kid)
	if err != nil {
		return nil
	}
	return e
}

func cloneIdentity(id *Identity) *Identity {
	c := *id
	c.Audience = slices.Clone(id.Audience)
	return &c
}
