package verify

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// KeySource returns the verification key for a kid. Implementations may
// fetch, and must be safe for concurrent use. For an unknown kid they return
// an error wrapping ErrUnknownKey. A token without a kid (allowed for HS256
// only) is looked up with kid "". The returned key must not be modified
// afterwards: the Verifier remembers what it derived from it.
//
// The sources of this package (NewStaticSource, NewRemoteSource,
// NewFileSource, and Sources over them) hand the Verifier keys prepared
// when their set was loaded. Any other KeySource works the same, at the
// cost of one map lookup per token: the Verifier prepares each key the
// first time it sees that jwk.Key value and remembers up to 256 of them by
// identity. Such a source should therefore return the same jwk.Key value
// for the same key, not a fresh copy per call, or every token pays the
// conversion.
type KeySource interface {
	Key(ctx context.Context, kid string) (jwk.Key, error)
}

// minRSABits is the smallest RSA modulus accepted (RFC 7518 section 3.3).
const minRSABits = 2048

// minHMACBytes is the smallest HS256 secret accepted: RFC 7518 section 3.2
// requires a key at least as long as the hash output.
const minHMACBytes = 32

// keyEntry is a verification key reduced to what the hot path needs: the
// raw public key or secret, and the JWK parameters that restrict its use.
// It is built once per key, not once per token.
type keyEntry struct {
	key    jwk.Key
	alg    string // the key's own alg parameter, "" when unset
	use    string
	ops    jwk.KeyOperationList
	rsa    *rsa.PublicKey // set for RSA keys (the public part only)
	secret []byte         // set for octet keys
}

// prepareKey derives a keyEntry. For an RSA private key only the public
// half is read: the private exponent is never used for verification.
func prepareKey(k jwk.Key) (*keyEntry, error) {
	if k == nil {
		return nil, errors.New("nil key")
	}
	e := &keyEntry{key: k, use: k.KeyUsage(), ops: k.KeyOps()}
	if a := k.Algorithm(); a != nil {
		e.alg = a.String()
	}
	switch key := k.(type) {
	case jwk.RSAPrivateKey:
		pub, err := key.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("public half of rsa key: %w", err)
		}
		rpub, ok := pub.(jwk.RSAPublicKey)
		if !ok {
			return nil, fmt.Errorf("public half of rsa key is %T", pub)
		}
		if e.rsa, err = rsaPublicKey(rpub.N(), rpub.E()); err != nil {
			return nil, err
		}
	case jwk.RSAPublicKey:
		var err error
		if e.rsa, err = rsaPublicKey(key.N(), key.E()); err != nil {
			return nil, err
		}
	case jwk.SymmetricKey:
		e.secret = slices.Clone(key.Octets())
		if len(e.secret) == 0 {
			return nil, errors.New("empty octet key")
		}
	default:
		return nil, fmt.Errorf("unsupported key type %q", k.KeyType())
	}
	return e, nil
}

// rsaPublicKey builds the raw key itself, rather than through jwk's Raw, so
// that an exponent that does not fit an int is refused instead of
// truncated.
func rsaPublicKey(n, e []byte) (*rsa.PublicKey, error) {
	nn := new(big.Int).SetBytes(n)
	if nn.Sign() <= 0 || nn.Bit(0) == 0 {
		return nil, errors.New("rsa modulus missing or even")
	}
	ee := new(big.Int).SetBytes(e)
	if !ee.IsInt64() || ee.Int64() < 3 || ee.Int64() > 1<<31-1 || ee.Bit(0) == 0 {
		return nil, errors.New("rsa public exponent out of range")
	}
	return &rsa.PublicKey{N: nn, E: int(ee.Int64())}, nil
}

// fitFor reports why the key may not verify a token with alg, or nil.
func (e *keyEntry) fitFor(alg string) error {
	if e.alg != "" && e.alg != alg {
		return fmt.Errorf("key is for %s, token says %s", quoteParam(e.alg), alg)
	}
	if e.use != "" && e.use != string(jwk.ForSignature) {
		return fmt.Errorf("key use is %s, not sig", quoteParam(e.use))
	}
	if len(e.ops) > 0 && !slices.Contains(e.ops, jwk.KeyOpVerify) {
		return errors.New("key_ops does not allow verify")
	}
	switch alg {
	case algRS256:
		if e.rsa == nil {
			return errors.New("RS256 needs an RSA key")
		}
		if e.rsa.N.BitLen() < minRSABits {
			return fmt.Errorf("rsa key of %d bits, want at least %d", e.rsa.N.BitLen(), minRSABits)
		}
	case algHS256:
		if e.secret == nil {
			return errors.New("HS256 needs an octet key")
		}
		if len(e.secret) < minHMACBytes {
			return fmt.Errorf("HS256 secret of %d bytes, want at least %d", len(e.secret), minHMACBytes)
		}
	default:
		return fmt.Errorf("algorithm %s not supported", quoteParam(alg))
	}
	return nil
}

// entrySource is implemented by this package's own sources: they hand out
// keyEntries prepared when the set was loaded, so the hot path does no
// conversion at all.
type entrySource interface {
	entry(ctx context.Context, kid string) (*keyEntry, error)
}

// entryCache remembers the keyEntry of keys from a foreign KeySource, keyed
// by the jwk.Key itself. It is bounded: when full it starts over, which
// costs one conversion per key.
type entryCache struct {
	m sync.Map // jwk.Key -> *keyEntry
	n atomic.Int64
}

const entryCacheSize = 256

func (c *entryCache) get(k jwk.Key) (*keyEntry, error) {
	if v, ok := c.m.Load(k); ok {
		return v.(*keyEntry), nil
	}
	e, err := prepareKey(k)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > entryCacheSize {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(k, e)
	return e, nil
}

// staticSource serves keys by kid from a set fixed at construction.
type staticSource struct {
	keys map[string]*keyEntry
	bad  map[string]error
}

var (
	_ KeySource   = (*staticSource)(nil)
	_ entrySource = (*staticSource)(nil)
)

// NewStaticSource returns a KeySource over set, looked up by kid; a key
// without a kid answers kid "". When two keys share a kid the first wins.
// Private asymmetric keys may be passed (handy in tests); only their public
// half is ever used. A key that cannot be used at all (an unsupported type,
// a broken modulus) makes its kid fail with that reason.
func NewStaticSource(set jwk.Set) KeySource {
	s := &staticSource{keys: map[string]*keyEntry{}, bad: map[string]error{}}
	if set == nil {
		return s
	}
	for i := range set.Len() {
		k, ok := set.Key(i)
		if !ok {
			continue
		}
		kid := k.KeyID()
		if _, dup := s.keys[kid]; dup {
			continue
		}
		if _, dup := s.bad[kid]; dup {
			continue
		}
		e, err := prepareKey(k)
		if err != nil {
			s.bad[kid] = err
			continue
		}
		s.keys[kid] = e
	}
	return s
}

// Key returns the key with kid.
func (s *staticSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	e, err := s.entry(ctx, kid)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

func (s *staticSource) entry(_ context.Context, kid string) (*keyEntry, error) {
	if e, ok := s.keys[kid]; ok {
		return e, nil
	}
	if err := s.bad[kid]; err != nil {
		return nil, fmt.Errorf("%w: unusable key: %w", ErrUnknownKey, err)
	}
	return nil, ErrUnknownKey
}

// Sources returns a KeySource that asks each source in turn and answers
// with the first key found: for example a remote RS256 key set and a static
// HS256 secret. A source error other than ErrUnknownKey stops the search,
// so a key source that is down is never mistaken for an unknown kid. Keys
// of this package's sources keep their prepared form through it.
func Sources(srcs ...KeySource) KeySource {
	return &multiSource{srcs: slices.Clone(srcs), foreign: new(entryCache)}
}

type multiSource struct {
	srcs    []KeySource
	foreign *entryCache // prepared keys of the sources not of this package
}

var (
	_ KeySource   = (*multiSource)(nil)
	_ entrySource = (*multiSource)(nil)
)

func (m *multiSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	e, err := m.entry(ctx, kid)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

func (m *multiSource) entry(ctx context.Context, kid string) (*keyEntry, error) {
	for _, s := range m.srcs {
		e, err := entryOf(ctx, s, m.foreign, kid)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, ErrUnknownKey) {
			return nil, err
		}
	}
	return nil, ErrUnknownKey
}

// entryOf asks src for kid's prepared key: directly from a source of this
// package, through cache for any other.
func entryOf(ctx context.Context, src KeySource, cache *entryCache, kid string) (*keyEntry, error) {
	if es, ok := src.(entrySource); ok {
		return es.entry(ctx, kid)
	}
	k, err := src.Key(ctx, kid)
	if err != nil {
		return nil, err
	}
	e, err := cache.get(k)
	if err != nil {
		return nil, fmt.Errorf("%w: unusable key: %w", ErrUnknownKey, err)
	}
	return e, nil
}
