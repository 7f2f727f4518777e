// Package keys owns the issuer's signing keys: generating RSA key pairs,
// sealing their private halves under the key-encryption key, deciding which
// key signs and which keys are published, and rotating them. Every replica
// reads the same keys from the store, so replicas agree without talking.
package keys

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// ErrNoActiveKey means no key is active yet: the store has keys, but none
// whose activation time has come.
var ErrNoActiveKey = errors.New("keys: no active signing key")

// ErrUnknownKey means no published key has the kid. It is pkg/verify's
// sentinel, so the verifier reports the Manager's misses as unknown keys.
var ErrUnknownKey = verify.ErrUnknownKey

// Options tune the Manager.
type Options struct {
	// AccessTokenTTL is the longest lifetime of a token a key signs; a
	// retired key stays published this long (plus margins) after it stops
	// signing.
	AccessTokenTTL time.Duration
	// ClockSkew is the verifiers' allowance, added to the publication margin.
	ClockSkew time.Duration
	// ReloadInterval is how stale the in-memory view of the keys may get
	// before it is read again. Another replica's rotation is seen within it.
	ReloadInterval time.Duration
	// Bits is the RSA modulus size; 2048 unless set.
	Bits int
	// ActivateIn is how long a key is published before it signs when a
	// rotation names no other time: at least the JWK set's max-age, so no
	// verifier meets a kid it has not seen.
	ActivateIn time.Duration
	// RotationInterval > 0 rotates automatically: Maintain keeps a next key
	// published that activates this long after the active one did.
	RotationInterval time.Duration
}

// Info describes a key for operators. It never holds private material.
type Info struct {
	KID         string
	Algorithm   string
	State       string // StateNext, StateActive, StateRetired or StateRevoked
	CreatedAt   time.Time
	ActivatesAt time.Time
	RetiresAt   *time.Time
	ExpiresAt   *time.Time // the row is gone then
	RevokedAt   *time.Time
}

// Manager is the issuer's view of its signing keys.
type Manager struct {
	st     store.Store
	sealer *Sealer
	opts   Options
	now    func() time.Time
	rand   io.Reader

	mu       sync.Mutex // serializes reloads
	snap     snapshotHolder
	privates sync.Map // kid -> jwk.Key (opened private keys, decrypted once)
}

type snapshotHolder struct {
	mu sync.RWMutex
	s  *snapshot
}

type snapshot struct {
	loadedAt time.Time
	keys     []store.SigningKey // not expired, by activation time
	public   map[string]jwk.Key
	jwks     []byte // the published set, serialized once per load
}

// NewManager returns a Manager over st. now and rand are injected for tests.
func NewManager(st store.Store, sealer *Sealer, opts Options, now func() time.Time, rand io.Reader) *Manager {
	if opts.Bits == 0 {
		opts.Bits = 2048
	}
	if opts.ReloadInterval <= 0 {
		opts.ReloadInterval = 30 * time.Second
	}
	return &Manager{st: st, sealer: sealer, opts: opts, now: now, rand: rand}
}

// publishMargin is how long a key stays published after it stops signing:
// every token it signed has expired by then, even one minted by a replica
// whose view of the keys was as stale as ReloadInterval allows.
func (m *Manager) publishMargin() time.Duration {
	return m.opts.AccessTokenTTL + m.opts.ClockSkew + m.opts.ReloadInterval
}

// EnsureKey makes sure a key signs: on a fresh install it creates one
// that is active at once. Concurrent instances create one key between them.
// It fails with ErrSealed when the key-encryption keys do not open the key
// that signs now or one published to sign later: an issuer started with
// the wrong --kek-file served every login a 500 while /readyz said ready.
func (m *Manager) EnsureKey(ctx context.Context) error {
	if _, err := m.maintain(ctx, false, nil); err != nil {
		return err
	}
	s, err := m.current(ctx)
	if err != nil {
		return err
	}
	now := m.now()
	active, _ := activeKey(s.keys, now)
	for _, k := range s.keys {
		if k.RevokedAt != nil || k.ActivatesAt.Before(active.ActivatesAt) {
			continue // never signs again: only its public half is used
		}
		if err := m.opens(k); err != nil {
			return err
		}
	}
	return nil
}

// opens reports whether the key-encryption keys open k's private half:
// ErrSealed, naming the key, when they do not.
func (m *Manager) opens(k store.SigningKey) error {
	if _, err := m.sealer.Open(k.PrivateSeal, k.KID); err != nil {
		return fmt.Errorf("keys: signing key %s: %w", k.KID, err)
	}
	return nil
}

// opensAny fails with ErrSealed when the key-encryption keys open none of
// ks: a key made now would be sealed under keys the replicas do not hold
// (issuer keys rotate or revoke run with the wrong --kek-file), and every
// login would be 500 once it signed. Any key will do, a retired one too,
// so that the right file can still replace an active key sealed under a
// wrong one.
func (m *Manager) opensAny(ks []store.SigningKey) error {
	for _, k := range ks {
		if m.opens(k) == nil {
			return nil
		}
	}
	if len(ks) == 0 {
		return nil
	}
	return fmt.Errorf("keys: the key-encryption keys open none of the %d signing keys: %w", len(ks), ErrSealed)
}

// CanSign reports whether the key that signs now can sign: its private
// half opens (ErrSealed otherwise: a key another replica sealed under a
// key-encryption key this one does not hold), or was opened before.
func (m *Manager) CanSign(ctx context.Context) error {
	_, err := m.SigningKey(ctx)
	return err
}

func (m *Manager) newKey(now, activates time.Time) (store.SigningKey, error) {
	priv, err := rsa.GenerateKey(m.rand, m.opts.Bits)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("generate rsa key: %w", err)
	}
	pub, err := jwk.FromRaw(&priv.PublicKey)
	if err != nil {
		return store.SigningKey{}, err
	}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return store.SigningKey{}, err
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	for k, v := range map[string]any{jwk.KeyIDKey: kid, jwk.AlgorithmKey: jwa.RS256, jwk.KeyUsageKey: "sig"} {
		if err := pub.Set(k, v); err != nil {
			return store.SigningKey{}, err
		}
	}
	pubJSON, err := json.Marshal(pub)
	if err != nil {
		return store.SigningKey{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.SigningKey{}, err
	}
	sealed, err := m.sealer.Seal(der, kid)
	if err != nil {
		return store.SigningKey{}, err
	}
	return store.SigningKey{
		KID: kid, Algorithm: string(jwa.RS256), PublicJWK: pubJSON, PrivateSeal: sealed,
		CreatedAt: now, ActivatesAt: activates,
	}, nil
}

// reload reads the keys from the store and replaces the snapshot.
func (m *Manager) reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UTC()
	ks, err := m.st.SigningKeys(ctx, now)
	if err != nil {
		return fmt.Errorf("keys: load: %w", err)
	}
	sortKeys(ks)
	s := &snapshot{loadedAt: now, keys: ks, public: make(map[string]jwk.Key, len(ks))}
	set := jwk.NewSet()
	for _, k := range ks {
		if k.RevokedAt != nil {
			continue // listed for operators, never published
		}
		pub, err := jwk.ParseKey(k.PublicJWK)
		if err != nil {
			return fmt.Errorf("keys: parse public key %s: %w", k.KID, err)
		}
		s.public[k.KID] = pub
		if err := set.AddKey(pub); err != nil {
			return fmt.Errorf("keys: publish %s: %w", k.KID, err)
		}
	}
	if s.jwks, err = json.Marshal(set); err != nil {
		return fmt.Errorf("keys: serialize key set: %w", err)
	}
	m.snap.mu.Lock()
	m.snap.s = s
	m.snap.mu.Unlock()
	return nil
}

// current returns a snapshot no older than ReloadInterval.
func (m *Manager) current(ctx context.Context) (*snapshot, error) {
	m.snap.mu.RLock()
	s := m.snap.s
	m.snap.mu.RUnlock()
	if s != nil && m.now().Sub(s.loadedAt) < m.opts.ReloadInterval {
		return s, nil
	}
	if err := m.reload(ctx); err != nil {
		if s != nil {
			// Keep signing and publishing with what we know: a database
			// blip must not stop token issuance for keys already loaded.
			return s, nil
		}
		return nil, err
	}
	m.snap.mu.RLock()
	defer m.snap.mu.RUnlock()
	return m.snap.s, nil
}

// active picks the key that signs at now.
func (s *snapshot) active(now time.Time) (store.SigningKey, bool) {
	return activeKey(s.keys, now)
}

// SigningKey returns the private key that signs now, as a jwk.Key carrying
// its kid and alg.
func (m *Manager) SigningKey(ctx context.Context) (jwk.Key, error) {
	s, err := m.current(ctx)
	if err != nil {
		return nil, err
	}
	k, ok := s.active(m.now())
	if !ok {
		return nil, ErrNoActiveKey
	}
	if v, ok := m.privates.Load(k.KID); ok {
		return v.(jwk.Key), nil
	}
	der, err := m.sealer.Open(k.PrivateSeal, k.KID)
	if err != nil {
		return nil, fmt.Errorf("keys: open %s: %w", k.KID, err)
	}
	raw, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("keys: parse private key %s: %w", k.KID, err)
	}
	priv, err := jwk.FromRaw(raw)
	if err != nil {
		return nil, err
	}
	if err := priv.Set(jwk.KeyIDKey, k.KID); err != nil {
		return nil, err
	}
	if err := priv.Set(jwk.AlgorithmKey, jwa.RS256); err != nil {
		return nil, err
	}
	m.privates.Store(k.KID, priv)
	return priv, nil
}

// Key returns the public key with kid, so the issuer verifies its own
// tokens exactly as a verifier does. An unknown kid forces one reload (it
// may have been created by another replica a moment ago); the reload
// interval bounds how often forged kids can cause one.
func (m *Manager) Key(ctx context.Context, kid string) (jwk.Key, error) {
	s, err := m.current(ctx)
	if err != nil {
		return nil, err
	}
	if k, ok := s.public[kid]; ok {
		return k, nil
	}
	if m.now().Sub(s.loadedAt) >= time.Second {
		if err := m.reload(ctx); err == nil {
			m.snap.mu.RLock()
			k, ok := m.snap.s.public[kid]
			m.snap.mu.RUnlock()
			if ok {
				return k, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownKey, kid)
}

// JWKS returns the published key set as JSON: the next key before it
// activates, the active key, and retired keys until every token they signed
// has expired.
func (m *Manager) JWKS(ctx context.Context) ([]byte, error) {
	s, err := m.current(ctx)
	if err != nil {
		return nil, err
	}
	return s.jwks, nil
}

// List describes every key still listed, oldest first: published ones and
// revoked ones until no token they signed can still be valid.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	if err := m.reload(ctx); err != nil {
		return nil, err
	}
	m.snap.mu.RLock()
	s := m.snap.s
	m.snap.mu.RUnlock()
	now := m.now()
	out := make([]Info, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, describe(s.keys, k, now))
	}
	return out, nil
}
