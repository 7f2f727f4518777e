package verify_test

import (
	"context"
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
