package token_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/palisade-auth/palisade/internal/token"
	"github.com/palisade-auth/palisade/pkg/verify"
)

const (
	issuer   = "https://issuer.test"
	audience = "api"
	ttl      = 15 * time.Minute
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

func clock() time.Time { return now }

func TestNewOpaque(t *testing.T) {
	seen := make(map[string]bool)
	for range 200 {
		tok, err := token.NewOpaque(rand.Reader)
		if err != nil {
			t.Fatalf("NewOpaque: %v", err)
		}
		if len(tok) != 43 {
			t.Fatalf("NewOpaque() = %q (%d chars), want 43", tok, len(tok))
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(tok)
		if err != nil || len(b) != 32 {
			t.Fatalf("NewOpaque() = %q decodes to %d bytes, %v; want 32 bytes of base64url", tok, len(b), err)
		}
		if !token.WellFormed(tok) {
			t.Errorf("WellFormed(NewOpaque() = %q) = false, want true", tok)
		}
		if seen[tok] {
			t.Fatalf("NewOpaque() repeated %q", tok)
		}
		seen[tok] = true
	}

	// Every random byte ends up in the token.
	src := bytes.Repeat([]byte{0xfb, 0xff, 0x01}, 11)[:32]
	tok, err := token.NewOpaque(bytes.NewReader(src))
	if want := base64.RawURLEncoding.EncodeToString(src); err != nil || tok != want {
		t.Errorf("NewOpaque(fixed bytes) = %q, %v, want %q", tok, err, want)
	}

	if tok, err := token.NewOpaque(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Errorf("NewOpaque(31-byte source) = %q, want error", tok)
	}
}

func TestWellFormed(t *testing.T) {
	valid, err := token.NewOpaque(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	raw[0], raw[1] = 0xfb, 0xff // '+' and '/' in the standard alphabet
	std := base64.RawStdEncoding.EncodeToString(raw)
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"fresh", valid, true},
		{"url alphabet", base64.RawURLEncoding.EncodeToString(raw), true},
		{"empty", "", false},
		{"short", valid[:42], false},
		{"long", valid + "A", false},
		{"padded", base64.URLEncoding.EncodeToString(raw), false},
		{"std alphabet", std, false},
		{"space", valid[:20] + " " + valid[21:], false},
		{"dot", valid[:42] + ".", false},
		{"non-ascii", valid[:41] + "é", false},
		{"non-canonical last char", valid[:42] + "B", false}, // the two spare bits are set
		{"jwt-like", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbg", false},
		{"hex sha256", strings.Repeat("ab", 32), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := token.WellFormed(tc.in); got != tc.want {
				t.Errorf("WellFormed(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestHash(t *testing.T) {
	for _, in := range []string{"", "a", "KmwfPG7VjD0k2b0Hk8v0xCqI-9c6cA7iK1a3nq0m5xQ"} {
		sum := sha256.Sum256([]byte(in))
		if got, want := token.Hash(in), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Hash(%q) = %q, want %q", in, got, want)
		}
	}
	if a, b := token.Hash("a"), token.Hash("b"); a == b {
		t.Errorf("Hash(a) = Hash(b) = %q", a)
	}
}

func TestSuccessor(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	parent, err := token.NewOpaque(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sibling, err := token.NewOpaque(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	s := token.Successor(secret, parent)
	if again := token.Successor(secret, parent); again != s {
		t.Errorf("Successor twice = %q, %q, want equal", s, again)
	}
	if !token.WellFormed(s) {
		t.Errorf("WellFormed(Successor(...) = %q) = false, want true", s)
	}
	if s == parent {
		t.Errorf("Successor(secret, parent) = parent")
	}
	if got := token.Successor(other, parent); got == s {
		t.Errorf("Successor is the same under two secrets: %q", got)
	}
	if got := token.Successor(secret, sibling); got == s {
		t.Errorf("Successor is the same for two parents: %q", got)
	}
	// The chain goes on: a successor's successor is new again.
	if next := token.Successor(secret, s); next == s || next == parent || !token.WellFormed(next) {
		t.Errorf("Successor(Successor(parent)) = %q, want a new well-formed token", next)
	}
}

// signingKey is an RSA-2048 key as the key Manager hands it out.
func signingKey(t *testing.T, kid string) (jwk.Key, *rsa.PrivateKey) {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.FromRaw(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	if err := k.Set(jwk.AlgorithmKey, jwa.RS256); err != nil {
		t.Fatal(err)
	}
	return k, priv
}

// keySource is a token.KeySource whose key a test can swap.
type keySource struct {
	mu  sync.Mutex
	key jwk.Key
	err error
}

func (s *keySource) SigningKey(context.Context) (jwk.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.err
}

func (s *keySource) set(k jwk.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = k
}

// publicSet returns the public halves of keys as a verify.KeySource.
func publicSet(t *testing.T, keys ...jwk.Key) verify.KeySource {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		pub, err := k.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := set.AddKey(pub); err != nil {
			t.Fatal(err)
		}
	}
	return verify.NewStaticSource(set)
}

// decodePart decodes one base64url part of a compact JWS into a map.
func decodePart(t *testing.T, part string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.Strict().DecodeString(part)
	if err != nil {
		t.Fatalf("JWS part %q is not unpadded base64url: %v", part, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("JWS part is not a JSON object: %v", err)
	}
	return m
}

func TestMint(t *testing.T) {
	key, priv := signingKey(t, "kid-1")
	src := &keySource{key: key}
	m := token.NewMinter(src, issuer, audience, ttl, clock, rand.Reader)
	if m.TTL() != ttl {
		t.Errorf("TTL() = %v, want %v", m.TTL(), ttl)
	}
	v, err := verify.New(publicSet(t, key), verify.Config{
		Issuer: issuer, Audience: audience, Algorithms: []string{"RS256"}, Now: clock,
	})
	if err != nil {
		t.Fatalf("verify.New: %v", err)
	}

	iat := now.Unix()
	cases := []struct {
		name   string
		claims token.Claims
		extra  map[string]any
	}{
		{"plain", token.Claims{Subject: "user-1", Role: "user", SessionID: "sess-1"}, nil},
		{"tenant", token.Claims{Subject: "user-2", Role: "admin", SessionID: "sess-2", TenantID: "t-1"},
			map[string]any{"tenant_id": "t-1"}},
		{"organization", token.Claims{Subject: "user-3", Role: "user", SessionID: "sess-3", OrganizationID: "o-1"},
			map[string]any{"organization_id": "o-1"}},
		{"both", token.Claims{Subject: "user-4", Role: "user", SessionID: "sess-4", TenantID: "t-1", OrganizationID: "o-1"},
			map[string]any{"tenant_id": "t-1", "organization_id": "o-1"}},
	}
	jtis := make(map[string]bool)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := m.Mint(context.Background(), tc.claims)
			if err != nil {
				t.Fatalf("Mint: %v", err)
			}
			parts := strings.Split(tok, ".")
			if len(parts) != 3 {
				t.Fatalf("Mint() = %q, want a compact JWS of three parts", tok)
			}

			hdr := decodePart(t, parts[0])
			if want := map[string]any{"alg": "RS256", "typ": "JWT", "kid": "kid-1"}; !maps.Equal(hdr, want) {
				t.Errorf("header = %v, want exactly %v", hdr, want)
			}

			claims := decodePart(t, parts[1])
			jti, _ := claims["jti"].(string)
			if b, err := base64.RawURLEncoding.DecodeString(jti); err != nil || len(b) < 16 {
				t.Errorf("jti = %v, want at least 128 random bits in base64url", claims["jti"])
			}
			if jtis[jti] {
				t.Errorf("jti %q repeated", jti)
			}
			jtis[jti] = true
			want := map[string]any{
				"iss": issuer, "aud": audience, "sub": tc.claims.Subject, "role": tc.claims.Role,
				"iat": json.Number(itoa(iat)), "nbf": json.Number(itoa(iat)),
				"exp": json.Number(itoa(iat + int64(ttl/time.Second))),
				"jti": jti, "sid": tc.claims.SessionID,
			}
			maps.Copy(want, tc.extra)
			if !maps.Equal(claims, want) {
				t.Errorf("claims = %v, want exactly %v", claims, want)
			}
			if got, want := slices.Sorted(maps.Keys(claims)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, want) {
				t.Errorf("claim names = %v, want %v", got, want)
			}

			if _, err := jws.Verify([]byte(tok), jws.WithKey(jwa.RS256, &priv.PublicKey)); err != nil {
				t.Errorf("jws.Verify(Mint()) with the public key: %v", err)
			}
			id, err := v.Verify(context.Background(), tok)
			if err != nil {
				t.Fatalf("verify.Verify(Mint()): %v", err)
			}
			wantID := verify.Identity{
				Subject: tc.claims.Subject, Role: tc.claims.Role, TenantID: tc.claims.TenantID,
				OrganizationID: tc.claims.OrganizationID, SessionID: tc.claims.SessionID, TokenID: jti,
				Issuer: issuer, Audience: []string{audience},
				IssuedAt: time.Unix(iat, 0), NotBefore: time.Unix(iat, 0), ExpiresAt: time.Unix(iat, 0).Add(ttl),
			}
			if !sameIdentity(*id, wantID) {
				t.Errorf("Verify(Mint()) = %+v, want %+v", *id, wantID)
			}
		})
	}

	t.Run("distinct jti for the same claims", func(t *testing.T) {
		c := token.Claims{Subject: "user-1", Role: "user", SessionID: "sess-1"}
		a, err := m.Mint(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Mint(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		ja := decodePart(t, strings.Split(a, ".")[1])["jti"]
		jb := decodePart(t, strings.Split(b, ".")[1])["jti"]
		if ja == jb {
			t.Errorf("two mints share jti %v", ja)
		}
	})
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func sameIdentity(a, b verify.Identity) bool {
	return a.Subject == b.Subject && a.Role == b.Role && a.TenantID == b.TenantID &&
		a.OrganizationID == b.OrganizationID && a.SessionID == b.SessionID && a.TokenID == b.TokenID &&
		a.Issuer == b.Issuer && slices.Equal(a.Audience, b.Audience) &&
		a.IssuedAt.Equal(b.IssuedAt) && a.NotBefore.Equal(b.NotBefore) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// TestMintFollowsKeySource checks that the Minter's cache of converted keys
// never signs with a key the source no longer hands out.
func TestMintFollowsKeySource(t *testing.T) {
	k1, _ := signingKey(t, "kid-1")
	k2, _ := signingKey(t, "kid-2")
	src := &keySource{key: k1}
	m := token.NewMinter(src, issuer, audience, ttl, clock, rand.Reader)
	v, err := verify.New(publicSet(t, k1, k2), verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"RS256"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	only2, err := verify.New(publicSet(t, k2), verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"RS256"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := token.Claims{Subject: "u", Role: "user", SessionID: "s"}

	for i, tc := range []struct {
		key jwk.Key
		kid string
	}{{k1, "kid-1"}, {k2, "kid-2"}, {k1, "kid-1"}} {
		src.set(tc.key)
		tok, err := m.Mint(ctx, c)
		if err != nil {
			t.Fatalf("Mint #%d: %v", i, err)
		}
		if got := decodePart(t, strings.Split(tok, ".")[0])["kid"]; got != tc.kid {
			t.Errorf("Mint #%d kid = %v, want %s", i, got, tc.kid)
		}
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Errorf("Verify(Mint #%d): %v", i, err)
		}
		_, err = only2.Verify(ctx, tok)
		if (tc.kid == "kid-2") != (err == nil) {
			t.Errorf("Verify(Mint #%d) against kid-2 only: %v", i, err)
		}
	}
}

func TestMintErrors(t *testing.T) {
	ctx := context.Background()
	c := token.Claims{Subject: "u", Role: "user", SessionID: "s"}

	t.Run("key source", func(t *testing.T) {
		boom := errors.New("database down")
		m := token.NewMinter(&keySource{err: boom}, issuer, audience, ttl, clock, rand.Reader)
		if tok, err := m.Mint(ctx, c); !errors.Is(err, boom) {
			t.Errorf("Mint with a failing key source = %q, %v, want an error wrapping %v", tok, err, boom)
		}
	})

	t.Run("not an RSA private key", func(t *testing.T) {
		k, _ := signingKey(t, "kid-1")
		pub, err := k.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		sym, err := jwk.FromRaw(bytes.Repeat([]byte{1}, 32))
		if err != nil {
			t.Fatal(err)
		}
		for name, key := range map[string]jwk.Key{"public": pub, "symmetric": sym} {
			m := token.NewMinter(&keySource{key: key}, issuer, audience, ttl, clock, rand.Reader)
			if tok, err := m.Mint(ctx, c); err == nil {
				t.Errorf("Mint with a %s key = %q, want error", name, tok)
			}
		}
	})

	t.Run("random source", func(t *testing.T) {
		k, _ := signingKey(t, "kid-1")
		m := token.NewMinter(&keySource{key: k}, issuer, audience, ttl, clock, bytes.NewReader(nil))
		if tok, err := m.Mint(ctx, c); err == nil {
			t.Errorf("Mint with an empty random source = %q, want error", tok)
		}
	})
}
