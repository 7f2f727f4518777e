package verify

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// keySet is one loaded JWK set, prepared. It is never modified after it is
// published, so readers need no lock: a reload builds a new one.
type keySet struct {
	*staticSource
	loadedAt time.Time
}

// keyLookup is implemented by this package's sources: it returns the key
// currently held for kid, or nil, without fetching anything. The token
// cache uses it to check that a remembered token's key is still the one
// the source would hand out.
type keyLookup interface {
	lookup(kid string) *keyEntry
}

var (
	_ keyLookup = (*staticSource)(nil)
	_ keyLookup = (*RemoteSource)(nil)
	_ keyLookup = (*FileSource)(nil)
)

func (s *staticSource) lookup(kid string) *keyEntry { return s.keys[kid] }

// find answers kid from the set; found is false when the set knows nothing
// about kid, as opposed to holding an unusable key under it.
func (ks *keySet) find(kid string) (e *keyEntry, err error, found bool) {
	if e, ok := ks.keys[kid]; ok {
		return e, nil, true
	}
	if err := ks.bad[kid]; err != nil {
		return nil, fmt.Errorf("%w: unusable key: %w", ErrUnknownKey, err), true
	}
	return nil, nil, false
}

// parseKeySet parses and prepares a JWK set document. A set without a
// single usable key is an error: publishing it would lock every client out,
// so the caller keeps the set it has instead.
func parseKeySet(b []byte, old *keySet) (*keySet, error) {
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parse jwk set: %w", err)
	}
	if set.Len() == 0 {
		return nil, errors.New("jwk set holds no keys")
	}
	ks := &keySet{staticSource: NewStaticSource(set).(*staticSource)}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("jwk set holds no usable key (%d unusable)", len(ks.bad))
	}
	if old != nil {
		// An unchanged key keeps its entry, so that the token cache, which
		// compares entries, survives a refresh that changed nothing.
		for kid, e := range ks.keys {
			if o := old.keys[kid]; o != nil && sameEntry(o, e) {
				ks.keys[kid] = o
			}
		}
	}
	return ks, nil
}

// sameEntry reports whether two prepared keys verify exactly the same
// tokens.
func sameEntry(a, b *keyEntry) bool {
	if a.alg != b.alg || a.use != b.use || !slices.Equal(a.ops, b.ops) {
		return false
	}
	if (a.rsa == nil) != (b.rsa == nil) || (a.secret == nil) != (b.secret == nil) {
		return false
	}
	if a.rsa != nil && (a.rsa.E != b.rsa.E || a.rsa.N.Cmp(b.rsa.N) != 0) {
		return false
	}
	return hmac.Equal(a.secret, b.secret)
}

// loadedAt returns when ks was loaded, or the zero time for nil.
func (ks *keySet) loadedAtOrZero() time.Time {
	if ks == nil {
		return time.Time{}
	}
	return ks.loadedAt
}

// lookupIn answers keyLookup from ks, which may be nil.
func lookupIn(ks *keySet, kid string) *keyEntry {
	if ks == nil {
		return nil
	}
	return ks.keys[kid]
}

// keyDropper is implemented by the key sources that can take a revoked key
// out of their set at once, instead of at their next reload: a Verifier
// with a RevocationSource registers it.
type keyDropper interface {
	dropKeys(kids []string)
}

var (
	_ keyDropper = (*RemoteSource)(nil)
	_ keyDropper = (*FileSource)(nil)
	_ keyDropper = (*multiSource)(nil)
)

// droppedKids are the kids a revocation list took out of a source. A kid is
// remembered until a loaded set no longer holds it: then the issuer has
// unpublished the key, and there is nothing left to drop.
type droppedKids map[string]struct{}

// add records kids, allocating d when nil.
func (d droppedKids) add(kids []string) droppedKids {
	if d == nil {
		d = droppedKids{}
	}
	for _, kid := range kids {
		d[kid] = struct{}{}
	}
	return d
}

// apply returns ks without the dropped kids, and forgets the kids ks does
// not hold. ks, freshly loaded, is not shared yet.
func (d droppedKids) apply(ks *keySet) *keySet {
	for kid := range d {
		_, ok := ks.keys[kid]
		_, bad := ks.bad[kid]
		if !ok && !bad {
			delete(d, kid)
		}
	}
	return d.without(ks)
}

// without returns ks, or a copy of it without the dropped kids when it
// holds any; ks itself is never modified, since readers may hold it.
func (d droppedKids) without(ks *keySet) *keySet {
	if ks == nil {
		return nil
	}
	hit := false
	for kid := range d {
		if _, ok := ks.keys[kid]; ok {
			hit = true
			break
		}
	}
	if !hit {
		return ks
	}
	n := &keySet{staticSource: &staticSource{keys: maps.Clone(ks.keys), bad: ks.bad}, loadedAt: ks.loadedAt}
	for kid := range d {
		delete(n.keys, kid)
	}
	return n
}

func (s *RemoteSource) dropKeys(kids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped = s.dropped.add(kids)
	if ks := s.cur.Load(); ks != nil {
		s.cur.Store(s.dropped.without(ks))
	}
}

func (s *FileSource) dropKeys(kids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped = s.dropped.add(kids)
	if ks := s.cur.Load(); ks != nil {
		s.cur.Store(s.dropped.without(ks))
	}
}

func (m *multiSource) dropKeys(kids []string) {
	for _, s := range m.srcs {
		if d, ok := s.(keyDropper); ok {
			d.dropKeys(kids)
		}
	}
}
