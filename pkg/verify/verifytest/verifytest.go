// Package verifytest mints access tokens and serves JWK sets and revocation
// feeds for the tests of applications that use package verify, and for
// verify's own tests.
//
// Every helper takes the test's testing.TB and fails the test on error.
// Outside a test (in an Example) nil may be passed; an error then panics.
package verifytest

import (
	"cmp"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// JWKSPath is where Server serves the public key set.
const JWKSPath = "/.well-known/jwks.json"

// KeySet is a set of RSA signing keys, the newest of which signs. Its
// exported fields set the defaults of the claims it mints; change them
// before minting, not concurrently with it.
type KeySet struct {
	Issuer   string           // iss; default "https://issuer.test"
	Audience string           // aud; default "api"
	TTL      time.Duration    // exp - iat; default 15 minutes
	Now      func() time.Time // nil means time.Now

	mu   sync.Mutex
	keys []signer // oldest first; the last one signs
}

type signer struct {
	kid  string
	priv *rsa.PrivateKey
}

// NewKeySet returns a KeySet with one fresh RSA-2048 key, kid "test-1".
// Two key sets have different keys under the same kid, which makes the
// second a handy forger.
func NewKeySet(t testing.TB) *KeySet {
	helper(t)
	ks := &KeySet{Issuer: "https://issuer.test", Audience: "api", TTL: 15 * time.Minute}
	ks.Rotate(t)
	return ks
}

// Rotate adds a fresh RSA-2048 key, which signs from now on, and returns
// its kid. Older keys stay in the published set, as during a real rotation.
func (ks *KeySet) Rotate(t testing.TB) string {
	helper(t)
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: generate rsa key: %w", err))
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	kid := fmt.Sprintf("test-%d", len(ks.keys)+1)
	ks.keys = append(ks.keys, signer{kid: kid, priv: priv})
	return kid
}

func (ks *KeySet) current() signer {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys[len(ks.keys)-1]
}

// KeyID returns the kid of the signing key.
func (ks *KeySet) KeyID() string { return ks.current().kid }

// PrivateKey returns the signing key, for tests that build tokens by hand.
func (ks *KeySet) PrivateKey() *rsa.PrivateKey { return ks.current().priv }

func (ks *KeySet) now() time.Time {
	if ks.Now != nil {
		return ks.Now()
	}
	return time.Now()
}

// Claims are the claims of a minted access token. Zero fields take the
// KeySet's defaults: Issuer, Audience, IssuedAt and NotBefore now, ExpiresAt
// now plus TTL. Empty optional claims are left out, as the issuer does.
type Claims struct {
	Subject        string
	Role           string
	TenantID       string
	OrganizationID string
	SessionID      string
	TokenID        string
	Issuer         string
	Audience       []string
	IssuedAt       time.Time
	NotBefore      time.Time
	ExpiresAt      time.Time
	// Extra claims are added last and override the ones above.
	Extra map[string]any
}

// Mint returns an RS256 token for c, signed by the current key with the
// header the issuer uses: alg, typ "JWT" and kid.
func (ks *KeySet) Mint(t testing.TB, c Claims) string {
	helper(t)
	now := ks.now()
	m := map[string]any{"sub": c.Subject}
	m["iss"] = cmp.Or(c.Issuer, ks.Issuer)
	switch len(c.Audience) {
	case 0:
		m["aud"] = ks.Audience
	case 1:
		m["aud"] = c.Audience[0]
	default:
		m["aud"] = c.Audience
	}
	iat := c.IssuedAt
	if iat.IsZero() {
		iat = now
	}
	nbf := c.NotBefore
	if nbf.IsZero() {
		nbf = iat
	}
	exp := c.ExpiresAt
	if exp.IsZero() {
		exp = iat.Add(cmp.Or(ks.TTL, 15*time.Minute))
	}
	m["iat"], m["nbf"], m["exp"] = iat.Unix(), nbf.Unix(), exp.Unix()
	for k, v := range map[string]string{
		"role": c.Role, "tenant_id": c.TenantID, "organization_id": c.OrganizationID,
		"sid": c.SessionID, "jti": c.TokenID,
	} {
		if v != "" {
			m[k] = v
		}
	}
	maps.Copy(m, c.Extra)
	return ks.MintClaims(t, m)
}

// Token returns a valid token for subject with role "user" and a session
// and token id.
func (ks *KeySet) Token(t testing.TB, subject string) string {
	helper(t)
	return ks.Mint(t, Claims{Subject: subject, Role: "user", SessionID: "session-1", TokenID: randomID()})
}

// MintClaims signs exactly claims with the current key (RS256 through jwx,
// header alg, typ "JWT", kid).
func (ks *KeySet) MintClaims(t testing.TB, claims map[string]any) string {
	helper(t)
	payload, err := json.Marshal(claims)
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: marshal claims: %w", err))
	}
	s := ks.current()
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, "JWT"); err != nil {
		fatal(t, err)
	}
	if err := hdr.Set(jws.KeyIDKey, s.kid); err != nil {
		fatal(t, err)
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.RS256, s.priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: sign: %w", err))
	}
	return string(tok)
}

// SignRaw marshals header and claims as given, whatever they say, and signs
// them RS256 with the current key: for tokens with odd headers (alg "none",
// crit, jku, no kid). Unlike Mint it adds nothing to the header.
func (ks *KeySet) SignRaw(t testing.TB, header, claims map[string]any) string {
	helper(t)
	h, err := json.Marshal(header)
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: marshal header: %w", err))
	}
	p, err := json.Marshal(claims)
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: marshal claims: %w", err))
	}
	return ks.SignRawJSON(t, h, p)
}

// SignRawJSON signs header and payload bytes as they are (duplicate names,
// broken JSON) RS256 with the current key.
func (ks *KeySet) SignRawJSON(t testing.TB, header, payload []byte) string {
	helper(t)
	input := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, ks.current().priv, crypto.SHA256, sum[:])
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: sign: %w", err))
	}
	return input + "." + b64(sig)
}

// SignHS256 signs header and payload bytes as they are with HMAC-SHA256
// under secret; handy for the algorithm-confusion attack, where the secret
// is the RSA public key published in the JWK set.
func SignHS256(header, payload, secret []byte) string {
	input := b64(header) + "." + b64(payload)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64(mac.Sum(nil))
}

// Encode builds a compact JWS from its three parts without signing.
func Encode(header, payload, signature []byte) string {
	return b64(header) + "." + b64(payload) + "." + b64(signature)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// PublicSet returns the public keys as a JWK set, each with kid, alg
// "RS256" and use "sig", as the issuer publishes them. It panics only on a
// bug in jwx: the keys are well-formed by construction.
func (ks *KeySet) PublicSet() jwk.Set {
	ks.mu.Lock()
	keys := append([]signer(nil), ks.keys...)
	ks.mu.Unlock()
	set := jwk.NewSet()
	for _, s := range keys {
		k, err := jwk.FromRaw(&s.priv.PublicKey)
		if err != nil {
			panic(fmt.Errorf("verifytest: jwk of public key: %w", err))
		}
		for name, v := range map[string]any{jwk.KeyIDKey: s.kid, jwk.AlgorithmKey: jwa.RS256, jwk.KeyUsageKey: jwk.ForSignature} {
			if err := k.Set(name, v); err != nil {
				panic(fmt.Errorf("verifytest: set %s: %w", name, err))
			}
		}
		if err := set.AddKey(k); err != nil {
			panic(fmt.Errorf("verifytest: add key: %w", err))
		}
	}
	return set
}

// Source returns a static verify.KeySource over the current public keys.
// Keys added by a later Rotate are not in it; call Source again.
func (ks *KeySet) Source() verify.KeySource {
	return verify.NewStaticSource(ks.PublicSet())
}

// JWKS returns the public JWK set as JSON.
func (ks *KeySet) JWKS() []byte {
	b, err := json.Marshal(ks.PublicSet())
	if err != nil {
		panic(fmt.Errorf("verifytest: marshal jwk set: %w", err))
	}
	return b
}

// Server starts an HTTP server answering JWKSPath with the current public
// key set (rotations show at once) and "Cache-Control: public, max-age=60".
// It is closed when the test ends; with a nil t the caller closes it.
func (ks *KeySet) Server(t testing.TB) *httptest.Server {
	helper(t)
	srv := httptest.NewServer(ks.Handler())
	if t != nil {
		t.Cleanup(srv.Close)
	}
	return srv
}

// Handler serves the public key set at JWKSPath, for tests that mount it
// on their own server.
func (ks *KeySet) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, r *http.Request) {
		b := ks.JWKS()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=60")
		_, _ = w.Write(b)
	})
	return mux
}

// Verifier returns a verify.Verifier over Source with the KeySet's issuer,
// audience and clock, no clock skew.
func (ks *KeySet) Verifier(t testing.TB) *verify.Verifier {
	helper(t)
	v, err := verify.New(ks.Source(), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, Now: ks.Now})
	if err != nil {
		fatal(t, fmt.Errorf("verifytest: %w", err))
	}
	return v
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%x", b)
}

func helper(t testing.TB) {
	if t != nil {
		t.Helper()
	}
}

func fatal(t testing.TB, err error) {
	if t == nil {
		panic(err)
	}
	t.Helper()
	t.Fatal(err)
}
