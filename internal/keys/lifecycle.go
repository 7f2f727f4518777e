package keys

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// Key states (API.md section 9). Every replica derives them from the
// timestamps in the store alone.
const (
	// StateNext is published and signs from its activation on.
	StateNext = "next"
	// StateActive signs: the newest activated, unrevoked key. Exactly one
	// key is active once any has activated.
	StateActive = "active"
	// StateRetired no longer signs and stays published until every token
	// it signed has expired.
	StateRetired = "retired"
	// StateRevoked is out of the key set and signs nothing; it stays listed
	// until no token it signed can still be valid.
	StateRevoked = "revoked"
)

// ErrNotFound means no listed key has the kid: it never existed, or it has
// expired and is gone.
var ErrNotFound = errors.New("keys: no such key")

// activeKey is the key that signs at now: the newest activated key that is
// not revoked. ks is in activation order.
func activeKey(ks []store.SigningKey, now time.Time) (store.SigningKey, bool) {
	for i := len(ks) - 1; i >= 0; i-- {
		k := ks[i]
		if k.RevokedAt == nil && !k.ActivatesAt.After(now) {
			return k, true
		}
	}
	return store.SigningKey{}, false
}

// nextKey is the unrevoked key that activates first after now.
func nextKey(ks []store.SigningKey, now time.Time) (store.SigningKey, bool) {
	for _, k := range ks {
		if k.RevokedAt == nil && k.ActivatesAt.After(now) {
			return k, true
		}
	}
	return store.SigningKey{}, false
}

// stateOf derives k's state at now among ks (activation order).
func stateOf(ks []store.SigningKey, k store.SigningKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return StateRevoked
	case k.ActivatesAt.After(now):
		return StateNext
	}
	if a, ok := activeKey(ks, now); ok && a.KID == k.KID {
		return StateActive
	}
	return StateRetired
}

func describe(ks []store.SigningKey, k store.SigningKey, now time.Time) Info {
	return Info{KID: k.KID, Algorithm: k.Algorithm, State: stateOf(ks, k, now), CreatedAt: k.CreatedAt,
		ActivatesAt: k.ActivatesAt, RetiresAt: k.RetiresAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

// sortKeys puts ks in activation order. Of keys activating at one
// instant, one retired at that instant (a rotation with no delay at the
// very instant the key activated) comes first, then the older.
func sortKeys(ks []store.SigningKey) {
	superseded := func(k store.SigningKey) bool { return k.RetiresAt != nil && !k.RetiresAt.After(k.ActivatesAt) }
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if !a.ActivatesAt.Equal(b.ActivatesAt) {
			return a.ActivatesAt.Before(b.ActivatesAt)
		}
		if superseded(a) != superseded(b) {
			return superseded(a)
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.KID < b.KID
	})
}

// lockedKeys takes the key lock of q's transaction and reads the listed
// keys in activation order.
func lockedKeys(ctx context.Context, q store.Queries, now time.Time) ([]store.SigningKey, error) {
	if err := q.LockSigningKeys(ctx); err != nil {
		return nil, err
	}
	ks, err := q.SigningKeys(ctx, now)
	if err != nil {
		return nil, err
	}
	sortKeys(ks)
	return ks, nil
}

// settle brings every unrevoked key's retirement in line with the
// schedule after a change: a key retires when the next unrevoked key
// activates (never, while none follows it) and stays published
// publishMargin longer. Keys retired in the past are history and stay as
// they are. It returns the kids it gave a new retirement, by that time.
func (m *Manager) settle(ctx context.Context, q store.Queries, now time.Time) (map[string]time.Time, error) {
	ks, err := q.SigningKeys(ctx, now)
	if err != nil {
		return nil, err
	}
	sortKeys(ks)
	live := slices.DeleteFunc(ks, func(k store.SigningKey) bool { return k.RevokedAt != nil })
	retired := map[string]time.Time{}
	for i, k := range live {
		var retires, expires *time.Time
		if i+1 < len(live) {
			r := live[i+1].ActivatesAt
			e := r.Add(m.publishMargin())
			retires, expires = &r, &e
		}
		switch {
		case retires == nil && k.RetiresAt == nil,
			retires != nil && k.RetiresAt != nil && k.RetiresAt.Equal(*retires),
			k.RetiresAt != nil && !k.RetiresAt.After(now):
			continue
		}
		if err := q.RescheduleSigningKey(ctx, k.KID, k.ActivatesAt, retires, expires); err != nil {
			return nil, err
		}
		if retires != nil {
			retired[k.KID] = *retires
		}
	}
	return retired, nil
}

// retiredAt lists the kids of retired whose retirement is at, sorted.
func retiredAt(retired map[string]time.Time, at time.Time) []string {
	out := []string{}
	for kid, r := range retired {
		if r.Equal(at) {
			out = append(out, kid)
		}
	}
	slices.Sort(out)
	return out
}

// find returns the Info of kid as of the latest load.
func (m *Manager) find(kid string) (Info, error) {
	m.snap.mu.RLock()
	s := m.snap.s
	m.snap.mu.RUnlock()
	for _, k := range s.keys {
		if k.KID == kid {
			return describe(s.keys, k, m.now()), nil
		}
	}
	return Info{}, fmt.Errorf("%w: %q", ErrNotFound, kid)
}

// Rotate creates a key that is published at once and starts signing after
// activateIn; the key signing then retires at that instant (and stays
// published until its tokens have expired). Publishing the new key before
// it signs lets verifiers learn it before they meet a token it signed.
// record is called inside the same transaction, with the new kid and the
// kids that retire when it activates, so the rotation and its audit entry
// commit together.
func (m *Manager) Rotate(ctx context.Context, activateIn time.Duration, record func(q store.Queries, kid string, retired []string) error) (Info, error) {
	var kid string
	err := m.st.InTx(ctx, func(q store.Queries) error {
		now := m.now().UTC()
		ks, err := lockedKeys(ctx, q, now)
		if err != nil {
			return err
		}
		if err := m.opensAny(ks); err != nil {
			return err
		}
		at := now.Add(activateIn)
		k, err := m.newKey(now, at)
		if err != nil {
			return err
		}
		// The keys signing at at retire then, whatever their schedule.
		stopped, err := q.RetireSigningKeys(ctx, at, at.Add(m.publishMargin()), k.KID)
		if err != nil {
			return err
		}
		if err := q.CreateSigningKey(ctx, k); err != nil {
			return err
		}
		kid = k.KID
		retired, err := m.settle(ctx, q, now)
		if err != nil {
			return err
		}
		for _, r := range stopped {
			retired[r] = at
		}
		if record != nil {
			return record(q, k.KID, retiredAt(retired, at))
		}
		return nil
	})
	if err != nil {
		return Info{}, fmt.Errorf("keys: rotate: %w", err)
	}
	if err := m.reload(ctx); err != nil {
		return Info{}, err
	}
	return m.find(kid)
}

// Maintain keeps the keys in shape: a key signs (a fresh install gets one
// at once), and when RotationInterval is set a next key is published, to
// activate RotationInterval after the active key did (and never sooner
// than ActivateIn from now); the active key retires at that instant. It
// decides from the store alone under the key lock, so replicas calling it
// at once create one key between them, and calling it again changes
// nothing until the next key has activated: exactly one new key per
// interval. record, when not nil, runs in the same transaction for a
// scheduled key, with its kid and the kids that retire when it activates.
// It reports whether it created a key.
func (m *Manager) Maintain(ctx context.Context, record func(q store.Queries, kid string, retired []string) error) (bool, error) {
	return m.maintain(ctx, m.opts.RotationInterval > 0, record)
}

func (m *Manager) maintain(ctx context.Context, rotate bool, record func(q store.Queries, kid string, retired []string) error) (bool, error) {
	created := false
	err := m.st.InTx(ctx, func(q store.Queries) error {
		created = false
		now := m.now().UTC()
		ks, err := lockedKeys(ctx, q, now)
		if err != nil {
			return err
		}
		active, ok := activeKey(ks, now)
		if !ok {
			if next, ok := nextKey(ks, now); ok {
				// Published already: it signs from now on rather than
				// leaving the issuer without a key until it activates.
				if err := q.RescheduleSigningKey(ctx, next.KID, now, next.RetiresAt, next.ExpiresAt); err != nil {
					return err
				}
				_, err := m.settle(ctx, q, now)
				return err
			}
			k, err := m.newKey(now, now)
			if err != nil {
				return err
			}
			if err := q.CreateSigningKey(ctx, k); err != nil {
				return err
			}
			created, active = true, k
			ks = append(ks, k)
		}
		if !rotate {
			return nil
		}
		if _, ok := nextKey(ks, now); ok {
			return nil // this interval's key is published already
		}
		at := active.ActivatesAt.Add(m.opts.RotationInterval)
		if earliest := now.Add(m.opts.ActivateIn); at.Before(earliest) {
			at = earliest
		}
		k, err := m.newKey(now, at)
		if err != nil {
			return err
		}
		if err := q.CreateSigningKey(ctx, k); err != nil {
			return err
		}
		created = true
		retired, err := m.settle(ctx, q, now)
		if err != nil {
			return err
		}
		if record != nil {
			return record(q, k.KID, retiredAt(retired, at))
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("keys: maintain: %w", err)
	}
	return created, m.reload(ctx)
}

// Revocation is what Revoke did, for its audit entry.
type Revocation struct {
	// Key is the revoked key as it was just before.
	Key Info
	// Successor is the key that signs from now on when Key was active:
	// the published next key, or a fresh one when none was published.
	Successor string
}

// Revoke takes the key kid out of the key set at once, whatever its
// state. When it was active, the published next key signs from now on, or
// a fresh key when none is published; when it was the next key, the key
// signing now keeps signing until the key after it activates (or for good,
// until a rotation). The kid enters the revocation feed, and record, when
// not nil, runs in the same transaction, so the revocation, its feed entry
// and its audit entry commit together. A key revoked already is returned as it is and record
// is not called; ErrNotFound when no listed key has kid.
func (m *Manager) Revoke(ctx context.Context, kid string, record func(q store.Queries, r Revocation) error) (Info, error) {
	err := m.st.InTx(ctx, func(q store.Queries) error {
		now := m.now().UTC()
		ks, err := lockedKeys(ctx, q, now)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ks, func(k store.SigningKey) bool { return k.KID == kid })
		if i < 0 {
			return ErrNotFound
		}
		target := ks[i]
		if target.RevokedAt != nil {
			return nil
		}
		r := Revocation{Key: describe(ks, target, now)}
		// Listed until no token it signed can still be valid, one minted
		// by a replica that has not reloaded yet included.
		if _, err := q.RevokeSigningKey(ctx, kid, now, now.Add(m.publishMargin())); err != nil {
			return err
		}
		// Verifiers that still hold it in a cached key set refuse its
		// tokens once they read the feed.
		if err := q.AppendRevocation(ctx, store.RevokedKey, kid, now); err != nil {
			return err
		}
		if r.Key.State == StateActive {
			if next, ok := nextKey(ks, now); ok {
				if err := q.RescheduleSigningKey(ctx, next.KID, now, next.RetiresAt, next.ExpiresAt); err != nil {
					return err
				}
				r.Successor = next.KID
			} else {
				if err := m.opensAny(ks); err != nil {
					return err
				}
				k, err := m.newKey(now, now)
				if err != nil {
					return err
				}
				if err := q.CreateSigningKey(ctx, k); err != nil {
					return err
				}
				r.Successor = k.KID
			}
		}
		if _, err := m.settle(ctx, q, now); err != nil {
			return err
		}
		if record != nil {
			return record(q, r)
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, kid)
	}
	if err != nil {
		return Info{}, fmt.Errorf("keys: revoke: %w", err)
	}
	if err := m.reload(ctx); err != nil {
		return Info{}, err
	}
	return m.find(kid)
}
