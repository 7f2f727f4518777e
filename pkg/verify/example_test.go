package verify_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func Example() {
	// In a test, pass t instead of nil.
	ks := verifytest.NewKeySet(nil)
	v, err := verify.New(ks.Source(), verify.Config{
		Issuer:   ks.Issuer,
		Audience: ks.Audience,
	})
	if err != nil {
		panic(err)
	}

	tok := ks.Mint(nil, verifytest.Claims{Subject: "user-1", Role: "admin"})
	id, err := v.Verify(context.Background(), tok)
	fmt.Println(id.Subject, id.Role, err)

	forged := verifytest.NewKeySet(nil).Token(nil, "user-1") // same kid, other key
	_, err = v.Verify(context.Background(), forged)
	fmt.Println(verify.ReasonOf(err))
	// Output:
	// user-1 admin <nil>
	// signature
}

func ExampleNewRemoteSource() {
	ks := verifytest.NewKeySet(nil)
	srv := ks.Server(nil) // in a test, pass t and skip the Close
	defer srv.Close()

	ctx := context.Background()
	src, err := verify.NewRemoteSource(ctx, srv.URL+verifytest.JWKSPath, verify.RemoteOptions{})
	if err != nil {
		panic(err)
	}
	defer src.Close()
	// The first fetch runs in the background; a sidecar reports not ready
	// until Ready. Refresh waits for a fetch instead.
	if err := src.Refresh(ctx); err != nil {
		panic(err)
	}
	fmt.Println("ready:", src.Ready())

	v, err := verify.New(src, verify.Config{Issuer: ks.Issuer, Audience: ks.Audience, CacheSize: 10000})
	if err != nil {
		panic(err)
	}
	id, err := v.Verify(ctx, ks.Token(nil, "user-1"))
	fmt.Println(id.Subject, err)

	// The issuer rotates: the new kid is fetched on first sight.
	ks.Rotate(nil)
	id, err = v.Verify(ctx, ks.Token(nil, "user-2"))
	fmt.Println(id.Subject, err)

	// A forged kid is refused; unknown kids cause at most one fetch per 10s.
	_, err = src.Key(ctx, "forged")
	fmt.Println(errors.Is(err, verify.ErrUnknownKey))
	// Output:
	// ready: true
	// user-1 <nil>
	// user-2 <nil>
	// true
}
