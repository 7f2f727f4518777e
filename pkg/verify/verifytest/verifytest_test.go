package verifytest_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func TestServer(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	srv := ks.Server(t)
	get := func() jwk.Set {
		t.Helper()
		resp, err := http.Get(srv.URL + verifytest.JWKSPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200", verifytest.JWKSPath, resp.StatusCode)
		}
		if got, want := resp.Header.Get("Cache-Control"), "public, max-age=60"; got != want {
			t.Errorf("Cache-Control = %q, want %q", got, want)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		set, err := jwk.Parse(body)
		if err != nil {
			t.Fatalf("jwk.Parse: %v", err)
		}
		return set
	}
	if n := get().Len(); n != 1 {
		t.Fatalf("served %d keys, want 1", n)
	}
	ks.Rotate(t)
	set := get()
	if n := set.Len(); n != 2 {
		t.Fatalf("served %d keys after Rotate, want 2", n)
	}
	for i := range set.Len() {
		k, _ := set.Key(i)
		if _, isPrivate := k.(jwk.RSAPrivateKey); isPrivate {
			t.Errorf("served key %q is private", k.KeyID())
		}
	}
	v, err := verify.New(verify.NewStaticSource(set), verify.Config{Issuer: ks.Issuer, Audience: ks.Audience})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), ks.Token(t, "user-1")); err != nil {
		t.Errorf("Verify(token of served key) = %v, want nil", err)
	}
}
