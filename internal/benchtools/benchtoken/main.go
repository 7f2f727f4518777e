// Command benchtoken writes a fresh RS256 JWK set to a file and prints an
// access token signed by its key, for a verifier started with --jwks-file,
// --issuer and --audience equal to the flags given here.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func main() {
	jwks := flag.String("jwks", "jwks.json", "file to write the public JWK set to")
	issuer := flag.String("issuer", "http://issuer.bench", "iss claim")
	audience := flag.String("audience", "api", "aud claim")
	ttl := flag.Duration("ttl", time.Hour, "token lifetime")
	flag.Parse()
	ks := verifytest.NewKeySet(nil) // nil: outside a test, errors panic
	ks.Issuer, ks.Audience, ks.TTL = *issuer, *audience, *ttl
	if err := os.WriteFile(*jwks, ks.JWKS(), 0o600); err != nil {
		log.Fatal(err)
	}
	fmt.Println(ks.Token(nil, "bench-user"))
}
