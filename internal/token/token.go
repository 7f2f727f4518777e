// Package token owns the tokens the issuer hands out: signed RS256 access
// tokens (minted, never stored) and opaque high-entropy tokens (refresh,
// reset, verification) of which only a SHA-256 is ever stored.
package token

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// OpaqueBytes is the entropy of an opaque token: 256 bits.
const OpaqueBytes = 32

// opaqueLen is the length of an opaque token's text: unpadded base64url.
var opaqueLen = base64.RawURLEncoding.EncodedLen(OpaqueBytes)

// NewOpaque returns a fresh opaque token read from rand (crypto/rand in
// production).
func NewOpaque(rand io.Reader) (string, error) {
	b := make([]byte, OpaqueBytes)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("token: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// WellFormed reports whether s has the shape of an opaque token, so that
// garbage is refused before it costs a database round trip.
func WellFormed(s string) bool {
	if len(s) != opaqueLen {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil
}

// Hash is the stored form of an opaque token: hex SHA-256. The tokens carry
// 256 random bits, so a fast hash is enough; a database reader cannot turn
// the hash back into a usable token.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Successor derives the refresh token that replaces parent. Deriving instead
// of drawing it lets the issuer hand the same successor out again to a client
// that lost the response (the reuse leeway) without ever storing a usable
// token: without the secret, the stored hashes say nothing about the chain.
func Successor(secret []byte, parent string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("refresh-successor/v1\x00"))
	mac.Write([]byte(parent))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Claims are the per-user claims of an access token; the Minter adds the
// registered ones.
type Claims struct {
	Subject        string
	Role           string
	SessionID      string
	TenantID       string
	OrganizationID string
}

// accessClaims is the exact payload: nothing else ever goes into a token.
type accessClaims struct {
	Issuer         string `json:"iss"`
	Audience       string `json:"aud"`
	Subject        string `json:"sub"`
	Role           string `json:"role"`
	IssuedAt       int64  `json:"iat"`
	NotBefore      int64  `json:"nbf"`
	Expiry         int64  `json:"exp"`
	ID             string `json:"jti"`
	SessionID      string `json:"sid"`
	TenantID       string `json:"tenant_id,omitempty"`
	OrganizationID string `json:"organization_id,omitempty"`
}

// KeySource yields the private key that signs now.
type KeySource interface {
	SigningKey(ctx context.Context) (jwk.Key, error)
}

// Minter signs access tokens.
type Minter struct {
	keys     KeySource
	issuer   string
	audience string
	ttl      time.Duration
	now      func() time.Time
	rand     io.Reader
	raw      sync.Map // jwk.Key -> *rsa.PrivateKey, precomputed
}

// NewMinter returns a Minter for tokens of the given issuer and audience
// that live ttl.
func NewMinter(keys KeySource, issuer, audience string, ttl time.Duration, now func() time.Time, rand io.Reader) *Minter {
	return &Minter{keys: keys, issuer: issuer, audience: audience, ttl: ttl, now: now, rand: rand}
}

// TTL is the lifetime of the tokens this Minter signs.
func (m *Minter) TTL() time.Duration { return m.ttl }

// Mint signs an access token for c.
func (m *Minter) Mint(ctx context.Context, c Claims) (string, error) {
	key, err := m.keys.SigningKey(ctx)
	if err != nil {
		return "", fmt.Errorf("token: signing key: %w", err)
	}
	jti := make([]byte, 16)
	if _, err := io.ReadFull(m.rand, jti); err != nil {
		return "", fmt.Errorf("token: random: %w", err)
	}
	now := m.now().Unix()
	payload, err := json.Marshal(accessClaims{
		Issuer: m.issuer, Audience: m.audience, Subject: c.Subject, Role: c.Role,
		IssuedAt: now, NotBefore: now, Expiry: now + int64(m.ttl/time.Second),
		ID: base64.RawURLEncoding.EncodeToString(jti), SessionID: c.SessionID,
		TenantID: c.TenantID, OrganizationID: c.OrganizationID,
	})
	if err != nil {
		return "", fmt.Errorf("token: encode claims: %w", err)
	}
	raw, err := m.rawKey(key)
	if err != nil {
		return "", err
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, "JWT"); err != nil {
		return "", err
	}
	if err := hdr.Set(jws.KeyIDKey, key.KeyID()); err != nil {
		return "", err
	}
	signed, err := jws.Sign(payload, jws.WithKey(jwa.RS256, raw, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("token: sign: %w", err)
	}
	return string(signed), nil
}

// rawKey converts a signing key once: handing jws the jwk.Key would rebuild
// the RSA key, and its CRT precomputation, on every signature.
func (m *Minter) rawKey(key jwk.Key) (*rsa.PrivateKey, error) {
	if v, ok := m.raw.Load(key); ok {
		return v.(*rsa.PrivateKey), nil
	}
	var raw rsa.PrivateKey
	if err := key.Raw(&raw); err != nil {
		return nil, fmt.Errorf("token: signing key %s is not an RSA private key: %w", key.KeyID(), err)
	}
	raw.Precompute()
	m.raw.Store(key, &raw)
	return &raw, nil
}
