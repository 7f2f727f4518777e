package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// FuzzVerify checks that no input panics and that every refusal is an
// *Error with a Reason.
func FuzzVerify(f *testing.F) {
	fx := getFixture()
	valid := fx.ks.Token(f, "user-1")
	s := segments(valid)
	f.Add(valid)
	f.Add("")
	f.Add("..")
	f.Add(s[0] + "." + s[1] + ".")
	f.Add(s[0] + "." + s[1] + "." + s[2][:len(s[2])-1])
	f.Add(strings.Replace(valid, ".", "..", 1))
	f.Add(s[1] + "." + s[0] + "." + s[2])
	f.Add(fx.ks.SignRawJSON(f, []byte(`{"alg":"RS256","kid":"test-1","kid":"x"}`), []byte(`{}`)))
	f.Add(fx.ks.SignRawJSON(f, []byte(`{"alg":"RS256","kid":"\ud83d\ude00"}`), []byte(`{"exp":"x"}`)))
	f.Add(fx.ks.SignRawJSON(f, []byte(`{"alg":"RS256","kid":"test-1"}`), []byte(`{"sub":"u","exp":1e999,"aud":[1]}`)))
	f.Add(fx.ks.SignRawJSON(f, []byte(`{"alg":"RS256","kid":"test-1"}`), []byte(`{"sub":"u","exp":9999999999,"aud":["api"],"iss":"https://issuer.test"}`)))
	f.Add(hs256(fx.secret, header(map[string]any{"alg": "HS256", "kid": "hs"}), claims(nil)))
	v := newVerifier(f, verify.Config{Algorithms: []string{"RS256", "HS256"}})
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := v.Verify(context.Background(), tok)
		if err == nil {
			if id == nil || id.Subject == "" {
				t.Fatalf("Verify(%q) = %v, nil: accepted without a subject", tok, id)
			}
			return
		}
		e, ok := err.(*verify.Error)
		if !ok || e.Reason == "" {
			t.Fatalf("Verify(%q) error = %#v, want *verify.Error with a Reason", tok, err)
		}
		if id != nil {
			t.Fatalf("Verify(%q) = %v with error %v", tok, id, err)
		}
	})
}
