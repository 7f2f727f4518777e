package verify_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

const (
	issuer   = "https://issuer.test"
	audience = "api"
)

var now = time.Unix(1_700_000_000, 0).UTC()

func clock() time.Time { return now }

// fixture holds keys that are slow to generate, shared by every test.
type fixture struct {
	ks     *verifytest.KeySet // kid "test-1"
	forger *verifytest.KeySet // another key under kid "test-1"
	weak   *rsa.PrivateKey    // 1024 bits, kid "weak"
	secret []byte             // HS256, kid "hs"
	set    jwk.Set            // everything above, public halves
}

var getFixture = sync.OnceValue(func() *fixture {
	f := &fixture{ks: verifytest.NewKeySet(nil), forger: verifytest.NewKeySet(nil)}
	f.ks.Now, f.forger.Now = clock, clock
	var err error
	if f.weak, err = rsa.GenerateKey(rand.Reader, 1024); err != nil {
		panic(err)
	}
	f.secret = []byte("0123456789abcdef0123456789abcdef")
	f.set = f.ks.PublicSet()
	add := func(raw any, params map[string]any) {
		k, err := jwk.FromRaw(raw)
		if err != nil {
			panic(err)
		}
		for n, v := range params {
			if err := k.Set(n, v); err != nil {
				panic(err)
			}
		}
		if err := f.set.AddKey(k); err != nil {
			panic(err)
		}
	}
	add(&f.weak.PublicKey, map[string]any{jwk.KeyIDKey: "weak"})
	add(f.secret, map[string]any{jwk.KeyIDKey: "hs"})
	add([]byte("short secret"), map[string]any{jwk.KeyIDKey: "hs-short"})
	add(&f.forger.PrivateKey().PublicKey, map[string]any{jwk.KeyIDKey: "enc", jwk.KeyUsageKey: "enc"})
	add(&f.forger.PrivateKey().PublicKey, map[string]any{jwk.KeyIDKey: "ps", jwk.AlgorithmKey: "PS256"})
	return f
})

func newVerifier(t testing.TB, cfg verify.Config) *verify.Verifier {
	t.Helper()
	cfg.Issuer = cmpOr(cfg.Issuer, issuer)
	cfg.Audience = cmpOr(cfg.Audience, audience)
	if cfg.Now == nil {
		cfg.Now = clock
	}
	v, err := verify.New(verify.NewStaticSource(getFixture().set), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// claims returns a valid claim set with the changes applied; a nil value
// deletes the claim.
func claims(changes map[string]any) map[string]any {
	c := map[string]any{
		"iss": issuer, "aud": audience, "sub": "user-1", "role": "user",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(15 * time.Minute).Unix(),
		"jti": "token-1", "sid": "session-1",
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func header(changes map[string]any) map[string]any {
	h := map[string]any{"alg": "RS256", "typ": "JWT", "kid": "test-1"}
	for k, v := range changes {
		if v == nil {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	return h
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func hs256(key []byte, h, c map[string]any) string {
	return verifytest.SignHS256(mustJSON(h), mustJSON(c), key)
}

// rs256 signs with an arbitrary RSA key.
func rs256(priv *rsa.PrivateKey, h, c map[string]any) string {
	in := base64.RawURLEncoding.EncodeToString(mustJSON(h)) + "." + base64.RawURLEncoding.EncodeToString(mustJSON(c))
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func segments(tok string) []string { return strings.Split(tok, ".") }

func TestVerify(t *testing.T) {
	f := getFixture()
	ks := f.ks
	both := []string{"RS256", "HS256"}
	valid := func(t *testing.T) string { return ks.SignRaw(t, header(nil), claims(nil)) }
	raw := func(h, c map[string]any) func(*testing.T) string {
		return func(t *testing.T) string { return ks.SignRaw(t, h, c) }
	}
	rawJSON := func(h, c string) func(*testing.T) string {
		return func(t *testing.T) string { return ks.SignRawJSON(t, []byte(h), []byte(c)) }
	}
	const okHeader = `{"alg":"RS256","typ":"JWT","kid":"test-1"}`
	// The classic confusion: HMAC keyed with the RSA public key as published.
	pubJWKS := ks.JWKS()
	pubDER := f.ks.PrivateKey().PublicKey.N.Bytes()

	tests := []struct {
		name  string
		token func(t *testing.T) string
		cfg   verify.Config
		want  verify.Reason // "" means valid
	}{
		{"valid", valid, verify.Config{}, ""},
		{"valid via Token", func(t *testing.T) string { return ks.Token(t, "user-1") }, verify.Config{}, ""},
		{"empty", func(*testing.T) string { return "" }, verify.Config{}, verify.ReasonMissing},
		{"one segment", func(*testing.T) string { return "abc" }, verify.Config{}, verify.ReasonMalformed},
		{"two segments", func(t *testing.T) string { s := segments(valid(t)); return s[0] + "." + s[1] }, verify.Config{}, verify.ReasonMalformed},
		{"four segments", func(t *testing.T) string { return valid(t) + ".abc" }, verify.Config{}, verify.ReasonMalformed},
		{"empty signature", func(t *testing.T) string { s := segments(valid(t)); return s[0] + "." + s[1] + "." }, verify.Config{}, verify.ReasonMalformed},
		{"empty segments", func(*testing.T) string { return ".." }, verify.Config{}, verify.ReasonMalformed},
		{"bad base64 char", func(t *testing.T) string { return "*" + valid(t)[1:] }, verify.Config{}, verify.ReasonMalformed},
		{"standard base64 char", func(t *testing.T) string { return "+" + valid(t)[1:] }, verify.Config{}, verify.ReasonMalformed},
		{"padding", func(t *testing.T) string { s := segments(valid(t)); return s[0] + "." + s[1] + "." + s[2] + "==" }, verify.Config{}, verify.ReasonMalformed},
		{"padded header", func(*testing.T) string {
			return base64.URLEncoding.EncodeToString([]byte(okHeader+" ")) + "." + segments(ks.SignRawJSON(nil, []byte(okHeader), mustJSON(claims(nil))))[1] + ".AAAA"
		}, verify.Config{}, verify.ReasonMalformed},
		{"line break", func(t *testing.T) string { tok := valid(t); return tok[:10] + "\n" + tok[10:] }, verify.Config{}, verify.ReasonMalformed},
		{"nonzero trailing bits", func(t *testing.T) string { tok := valid(t); return tok[:len(tok)-1] + "B" }, verify.Config{}, verify.ReasonMalformed},
		{"impossible length", func(t *testing.T) string { s := segments(valid(t)); return s[0] + "." + s[1] + "." + s[2] + "AAA" }, verify.Config{}, verify.ReasonMalformed},
		{"header array", rawJSON(`[]`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header string", rawJSON(`"RS256"`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header broken json", rawJSON(`{"alg":"RS256"`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header trailing data", rawJSON(okHeader+`x`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header trailing comma", rawJSON(`{"alg":"RS256","kid":"test-1",}`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header whitespace", rawJSON(" {\n\"alg\" : \"RS256\" ,\t\"kid\":\"test-1\" } ", string(mustJSON(claims(nil)))), verify.Config{}, ""},
		{"header escaped name", rawJSON(`{"\u0061lg":"RS256","kid":"test-\u0031"}`, string(mustJSON(claims(nil)))), verify.Config{}, ""},
		{"header invalid utf8", rawJSON("{\"alg\":\"RS256\",\"kid\":\"\xff\"}", string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"header lone surrogate", rawJSON(`{"alg":"RS256","kid":"\ud800"}`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonMalformed},
		{"alg none", raw(header(map[string]any{"alg": "none"}), claims(nil)), verify.Config{}, verify.ReasonAlgorithm},
		{"alg NONE", raw(header(map[string]any{"alg": "NONE"}), claims(nil)), verify.Config{}, verify.ReasonAlgorithm},
		{"alg none unsigned", func(*testing.T) string {
			return verifytest.Encode(mustJSON(header(map[string]any{"alg": "none"})), mustJSON(claims(nil)), []byte{0})
		}, verify.Config{Algorithms: both}, verify.ReasonAlgorithm},
		{"alg lowercase rs256", raw(header(map[string]any{"alg": "rs256"}), claims(nil)), verify.Config{}, verify.ReasonAlgorithm},
		{"alg RS512", raw(header(map[string]any{"alg": "RS512"}), claims(nil)), verify.Config{}, verify.ReasonAlgorithm},
		{"alg missing", raw(header(map[string]any{"alg": nil}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"alg not a string", raw(header(map[string]any{"alg": 256}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"HS256 only RS256 allowed", func(*testing.T) string {
			return hs256(f.secret, header(map[string]any{"alg": "HS256", "kid": "hs"}), claims(nil))
		}, verify.Config{}, verify.ReasonAlgorithm},
		{"HS256 confusion jwks secret", func(*testing.T) string {
			return hs256(pubJWKS, header(map[string]any{"alg": "HS256"}), claims(nil))
		}, verify.Config{}, verify.ReasonAlgorithm},
		{"HS256 confusion modulus secret both allowed", func(*testing.T) string {
			return hs256(pubDER, header(map[string]any{"alg": "HS256"}), claims(nil))
		}, verify.Config{Algorithms: both}, verify.ReasonAlgorithm},
		{"HS256 valid", func(*testing.T) string {
			return hs256(f.secret, header(map[string]any{"alg": "HS256", "kid": "hs"}), claims(nil))
		}, verify.Config{Algorithms: both}, ""},
		{"HS256 wrong secret", func(*testing.T) string {
			return hs256([]byte("another secret of thirty-two bytes!"), header(map[string]any{"alg": "HS256", "kid": "hs"}), claims(nil))
		}, verify.Config{Algorithms: both}, verify.ReasonSignature},
		{"HS256 no kid unknown", func(*testing.T) string {
			return hs256(f.secret, header(map[string]any{"alg": "HS256", "kid": nil}), claims(nil))
		}, verify.Config{Algorithms: both}, verify.ReasonUnknownKey},
		{"HS256 short secret", func(*testing.T) string {
			return hs256([]byte("short secret"), header(map[string]any{"alg": "HS256", "kid": "hs-short"}), claims(nil))
		}, verify.Config{Algorithms: both}, verify.ReasonAlgorithm},
		{"RS256 with octet key", raw(header(map[string]any{"kid": "hs"}), claims(nil)), verify.Config{Algorithms: both}, verify.ReasonAlgorithm},
		{"key use enc", func(*testing.T) string {
			return rs256(f.forger.PrivateKey(), header(map[string]any{"kid": "enc"}), claims(nil))
		}, verify.Config{}, verify.ReasonAlgorithm},
		{"key alg PS256", func(*testing.T) string {
			return rs256(f.forger.PrivateKey(), header(map[string]any{"kid": "ps"}), claims(nil))
		}, verify.Config{}, verify.ReasonAlgorithm},
		{"rsa 1024", func(*testing.T) string { return rs256(f.weak, header(map[string]any{"kid": "weak"}), claims(nil)) }, verify.Config{}, verify.ReasonAlgorithm},
		{"kid missing", raw(header(map[string]any{"kid": nil}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"kid empty", raw(header(map[string]any{"kid": ""}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"kid unknown", raw(header(map[string]any{"kid": "nope"}), claims(nil)), verify.Config{}, verify.ReasonUnknownKey},
		{"foreign key same kid", func(t *testing.T) string { return f.forger.SignRaw(t, header(nil), claims(nil)) }, verify.Config{}, verify.ReasonSignature},
		{"tampered payload", func(t *testing.T) string {
			s := segments(valid(t))
			other := segments(ks.SignRaw(t, header(nil), claims(map[string]any{"role": "admin"})))
			return s[0] + "." + other[1] + "." + s[2]
		}, verify.Config{}, verify.ReasonSignature},
		{"tampered signature", func(t *testing.T) string {
			s := segments(valid(t))
			sig, _ := base64.RawURLEncoding.DecodeString(s[2])
			sig[10] ^= 1
			return s[0] + "." + s[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
		}, verify.Config{}, verify.ReasonSignature},
		{"short signature", func(t *testing.T) string { s := segments(valid(t)); return s[0] + "." + s[1] + ".AAAA" }, verify.Config{}, verify.ReasonSignature},
		{"typ jwt lowercase", raw(header(map[string]any{"typ": "jwt"}), claims(nil)), verify.Config{}, ""},
		{"typ at+jwt", raw(header(map[string]any{"typ": "AT+JWT"}), claims(nil)), verify.Config{}, ""},
		{"typ absent", raw(header(map[string]any{"typ": nil}), claims(nil)), verify.Config{}, ""},
		{"typ JOSE", raw(header(map[string]any{"typ": "JOSE"}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"typ not a string", raw(header(map[string]any{"typ": 1}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"crit", raw(header(map[string]any{"crit": []string{"exp"}}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"jku", raw(header(map[string]any{"jku": "https://evil.test/jwks"}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"jwk", raw(header(map[string]any{"jwk": map[string]any{"kty": "oct", "k": "AAAA"}}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"x5u", raw(header(map[string]any{"x5u": "https://evil.test/cert"}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"x5c", raw(header(map[string]any{"x5c": []string{"AAAA"}}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"cty", raw(header(map[string]any{"cty": "JWT"}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"unknown param", raw(header(map[string]any{"foo": "bar"}), claims(nil)), verify.Config{}, verify.ReasonHeader},
		{"duplicate alg", rawJSON(`{"alg":"RS256","kid":"test-1","alg":"RS256"}`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonHeader},
		{"duplicate kid escaped", rawJSON(`{"alg":"RS256","kid":"test-1","\u006bid":"nope"}`, string(mustJSON(claims(nil)))), verify.Config{}, verify.ReasonHeader},
		{"expired", raw(header(nil), claims(map[string]any{"exp": now.Add(-time.Second).Unix()})), verify.Config{}, verify.ReasonExpired},
		{"exp exactly now", raw(header(nil), claims(map[string]any{"exp": now.Unix()})), verify.Config{}, verify.ReasonExpired},
		{"expired within skew", raw(header(nil), claims(map[string]any{"exp": now.Add(-29 * time.Second).Unix()})), verify.Config{ClockSkew: 30 * time.Second}, ""},
		{"expired at skew", raw(header(nil), claims(map[string]any{"exp": now.Add(-30 * time.Second).Unix()})), verify.Config{ClockSkew: 30 * time.Second}, verify.ReasonExpired},
		{"exp float", raw(header(nil), claims(map[string]any{"exp": float64(now.Unix()) + 0.5})), verify.Config{}, ""},
		{"exp exponent", rawJSON(okHeader, `{"iss":"https://issuer.test","aud":"api","sub":"u","exp":1.7000009E9}`), verify.Config{}, ""},
		{"exp string", raw(header(nil), claims(map[string]any{"exp": "1700000900"})), verify.Config{}, verify.ReasonClaims},
		{"exp null", rawJSON(okHeader, `{"iss":"https://issuer.test","aud":"api","sub":"u","exp":null}`), verify.Config{}, verify.ReasonClaims},
		{"exp missing", raw(header(nil), claims(map[string]any{"exp": nil})), verify.Config{}, verify.ReasonClaims},
		{"exp huge", rawJSON(okHeader, `{"iss":"https://issuer.test","aud":"api","sub":"u","exp":1e300}`), verify.Config{}, verify.ReasonClaims},
		{"exp beyond int64", rawJSON(okHeader, `{"iss":"https://issuer.test","aud":"api","sub":"u","exp":99999999999999999999}`), verify.Config{}, verify.ReasonClaims},
		{"nbf within skew", raw(header(nil), claims(map[string]any{"nbf": now.Add(30 * time.Second).Unix()})), verify.Config{ClockSkew: 30 * time.Second}, ""},
		{"nbf beyond skew", raw(header(nil), claims(map[string]any{"nbf": now.Add(31 * time.Second).Unix()})), verify.Config{ClockSkew: 30 * time.Second}, verify.ReasonNotYetValid},
		{"nbf future no skew", raw(header(nil), claims(map[string]any{"nbf": now.Add(time.Second).Unix()})), verify.Config{}, verify.ReasonNotYetValid},
		{"nbf string", raw(header(nil), claims(map[string]any{"nbf": "soon"})), verify.Config{}, verify.ReasonClaims},
		{"iat future", raw(header(nil), claims(map[string]any{"iat": now.Add(time.Minute).Unix()})), verify.Config{ClockSkew: 30 * time.Second}, verify.ReasonNotYetValid},
		{"iat absent", raw(header(nil), claims(map[string]any{"iat": nil, "nbf": nil})), verify.Config{}, ""},
		{"wrong iss", raw(header(nil), claims(map[string]any{"iss": "https://evil.test"})), verify.Config{}, verify.ReasonIssuer},
		{"iss trailing slash", raw(header(nil), claims(map[string]any{"iss": issuer + "/"})), verify.Config{}, verify.ReasonIssuer},
		{"iss missing", raw(header(nil), claims(map[string]any{"iss": nil})), verify.Config{}, verify.ReasonIssuer},
		{"aud array", raw(header(nil), claims(map[string]any{"aud": []string{"other", audience}})), verify.Config{}, ""},
		{"aud wrong", raw(header(nil), claims(map[string]any{"aud": "other"})), verify.Config{}, verify.ReasonAudience},
		{"aud array wrong", raw(header(nil), claims(map[string]any{"aud": []string{"other", "api2"}})), verify.Config{}, verify.ReasonAudience},
		{"aud empty array", raw(header(nil), claims(map[string]any{"aud": []string{}})), verify.Config{}, verify.ReasonAudience},
		{"aud missing", raw(header(nil), claims(map[string]any{"aud": nil})), verify.Config{}, verify.ReasonAudience},
		{"aud number", raw(header(nil), claims(map[string]any{"aud": 1})), verify.Config{}, verify.ReasonClaims},
		{"aud array of numbers", raw(header(nil), claims(map[string]any{"aud": []int{1}})), verify.Config{}, verify.ReasonClaims},
		{"sub missing", raw(header(nil), claims(map[string]any{"sub": nil})), verify.Config{}, verify.ReasonClaims},
		{"sub empty", raw(header(nil), claims(map[string]any{"sub": ""})), verify.Config{}, verify.ReasonClaims},
		{"sub number", raw(header(nil), claims(map[string]any{"sub": 42})), verify.Config{}, verify.ReasonClaims},
		{"role number", raw(header(nil), claims(map[string]any{"role": 1})), verify.Config{}, verify.ReasonClaims},
		{"payload array", rawJSON(okHeader, `[1]`), verify.Config{}, verify.ReasonMalformed},
		{"payload broken json", rawJSON(okHeader, `{"sub":`), verify.Config{}, verify.ReasonMalformed},
		{"oversized", raw(header(nil), claims(map[string]any{"pad": strings.Repeat("x", 8192)})), verify.Config{}, verify.ReasonMalformed},
		{"over custom limit", valid, verify.Config{MaxTokenBytes: 100}, verify.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifier(t, tt.cfg)
			tok := tt.token(t)
			id, err := v.Verify(context.Background(), tok)
			if tt.want == "" {
				if err != nil || id == nil {
					t.Fatalf("Verify(%s) = %v, %v, want an identity", tt.name, id, err)
				}
				return
			}
			if id != nil {
				t.Errorf("Verify(%s) returned identity %+v with an error", tt.name, id)
			}
			var ve *verify.Error
			if !errors.As(err, &ve) {
				t.Fatalf("Verify(%s) error = %v (%T), want *verify.Error", tt.name, err, err)
			}
			if ve.Reason != tt.want {
				t.Fatalf("Verify(%s) reason = %s (%v), want %s", tt.name, ve.Reason, err, tt.want)
			}
			if len(tok) > 20 && strings.Contains(err.Error(), tok[len(tok)-20:]) {
				t.Errorf("Verify(%s) error %q contains the token", tt.name, err)
			}
		})
	}
}

func TestVerifyIdentity(t *testing.T) {
	f := getFixture()
	tok := f.ks.Mint(t, verifytest.Claims{
		Subject: "user-1", Role: "admin", TenantID: "tenant-1", OrganizationID: "org-1",
		SessionID: "session-1", TokenID: "token-1", Audience: []string{"api", "other"},
	})
	id, err := newVerifier(t, verify.Config{}).Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("Verify = %v, want nil", err)
	}
	want := verify.Identity{
		Subject: "user-1", Role: "admin", TenantID: "tenant-1", OrganizationID: "org-1",
		SessionID: "session-1", TokenID: "token-1", Issuer: issuer, Audience: []string{"api", "other"},
		IssuedAt: now, NotBefore: now, ExpiresAt: now.Add(15 * time.Minute),
	}
	if !identityEqual(*id, want) {
		t.Errorf("Verify = %+v, want %+v", *id, want)
	}
}

func identityEqual(a, b verify.Identity) bool {
	return a.Subject == b.Subject && a.Role == b.Role && a.TenantID == b.TenantID &&
		a.OrganizationID == b.OrganizationID && a.SessionID == b.SessionID && a.TokenID == b.TokenID &&
		a.Issuer == b.Issuer && slices.Equal(a.Audience, b.Audience) &&
		a.IssuedAt.Equal(b.IssuedAt) && a.NotBefore.Equal(b.NotBefore) && a.ExpiresAt.Equal(b.ExpiresAt)
}

func TestRotation(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	ks.Now = clock
	old := ks.Token(t, "user-1")
	kid := ks.Rotate(t)
	if kid != "test-2" {
		t.Errorf("Rotate = %q, want test-2", kid)
	}
	v := ks.Verifier(t)
	for _, tok := range []string{old, ks.Token(t, "user-1")} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("Verify after rotation = %v, want nil", err)
		}
	}
}

// foreignSource is a KeySource from outside the package: the Verifier
// prepares its keys itself.
type foreignSource struct {
	set jwk.Set
	err error
}

func (s foreignSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	if s.err != nil {
		return nil, s.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if k, ok := s.set.LookupKeyID(kid); ok {
		return k, nil
	}
	return nil, verify.ErrUnknownKey
}

func TestForeignSource(t *testing.T) {
	f := getFixture()
	boom := errors.New("key server down")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		src     verify.KeySource
		ctx     context.Context
		kid     string
		want    verify.Reason
		wantErr error
	}{
		{"found", foreignSource{set: f.set}, context.Background(), "test-1", "", nil},
		{"found through Sources", verify.Sources(foreignSource{set: jwk.NewSet()}, foreignSource{set: f.set}), context.Background(), "test-1", "", nil},
		{"unknown", foreignSource{set: f.set}, context.Background(), "nope", verify.ReasonUnknownKey, verify.ErrUnknownKey},
		{"source error", foreignSource{err: boom}, context.Background(), "test-1", verify.ReasonUnknownKey, boom},
		{"Sources stops at error", verify.Sources(foreignSource{err: boom}, foreignSource{set: f.set}), context.Background(), "test-1", verify.ReasonUnknownKey, boom},
		{"canceled", foreignSource{set: f.set}, canceled, "test-1", verify.ReasonUnknownKey, context.Canceled},
		{"weak key", foreignSource{set: f.set}, context.Background(), "weak", verify.ReasonAlgorithm, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := verify.New(tt.src, verify.Config{Issuer: issuer, Audience: audience, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			tok := f.ks.SignRaw(t, header(map[string]any{"kid": tt.kid}), claims(nil))
			for range 2 { // the second time from the Verifier's key cache
				_, err = v.Verify(tt.ctx, tok)
				if got := verify.ReasonOf(err); got != tt.want {
					t.Fatalf("Verify reason = %q (%v), want %q", got, err, tt.want)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("Verify = %v, want it to wrap %v", err, tt.wantErr)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	src := verify.NewStaticSource(nil)
	tests := []struct {
		name    string
		src     verify.KeySource
		cfg     verify.Config
		wantErr bool
	}{
		{"minimal", src, verify.Config{Issuer: issuer, Audience: audience}, false},
		{"both algorithms", src, verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"HS256", "RS256"}}, false},
		{"nil source", nil, verify.Config{Issuer: issuer, Audience: audience}, true},
		{"no issuer", src, verify.Config{Audience: audience}, true},
		{"no audience", src, verify.Config{Issuer: issuer}, true},
		{"none", src, verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"none"}}, true},
		{"RS512", src, verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"RS256", "RS512"}}, true},
		{"negative skew", src, verify.Config{Issuer: issuer, Audience: audience, ClockSkew: -time.Second}, true},
		{"negative size", src, verify.Config{Issuer: issuer, Audience: audience, MaxTokenBytes: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := verify.New(tt.src, tt.cfg)
			if (err != nil) != tt.wantErr || (err == nil) != (v != nil) {
				t.Errorf("New(%+v) = %v, %v, want error %v", tt.cfg, v, err, tt.wantErr)
			}
		})
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if id, ok := verify.FromContext(ctx); ok || id != nil {
		t.Errorf("FromContext(empty) = %v, %v, want nil, false", id, ok)
	}
	want := &verify.Identity{Subject: "user-1"}
	if id, ok := verify.FromContext(verify.NewContext(ctx, want)); !ok || id != want {
		t.Errorf("FromContext(NewContext(id)) = %v, %v, want %v, true", id, ok, want)
	}
	if id, ok := verify.FromContext(verify.NewContext(ctx, nil)); ok || id != nil {
		t.Errorf("FromContext(NewContext(nil)) = %v, %v, want nil, false", id, ok)
	}
}
