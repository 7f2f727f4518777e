// Package internal_test enforces the direction of imports (STYLE.md rule 1):
// cmd -> transport -> domain -> store and crypto helpers, and pkg never
// reaches into internal.
package internal_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/palisade-auth/palisade/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the check would prove nothing", len(pkgs))
	}
	return pkgs
}

const mod = "github.com/palisade-auth/palisade/"

func TestImportDirection(t *testing.T) {
	drivers := []string{"github.com/jmoiron/sqlx", "github.com/lib/pq", "modernc.org/sqlite", "database/sql"}
	// Packages allowed to talk SQL: the store implementation, the migration
	// files and the test-database helper.
	sqlAllowed := map[string]bool{
		mod + "internal/store/sqlstore": true, mod + "migrations": true,
		mod + "internal/testdb": true, mod + "internal/testdb/pgprobe": true,
	}
	transport := []string{mod + "internal/issuerapi", mod + "internal/proxy"}
	// The domain packages: the flows and what they are made of. They never
	// speak HTTP (STYLE.md rule 4). Not listed, because speaking HTTP is
	// their job: the webhook dispatcher and netguard (outbound HTTP
	// clients), clientip and apiversion (request helpers of the transport).
	domain := map[string]bool{}
	for _, d := range []string{"apperr", "auth", "idempotency", "keys", "mail", "password", "ratelimit", "store", "token"} {
		domain[mod+"internal/"+d] = true
	}
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		name := p.ImportPath
		for _, imp := range p.Imports {
			if !sqlAllowed[name] {
				for _, d := range drivers {
					if imp == d || strings.HasPrefix(imp, d+"/") {
						t.Errorf("%s imports %s; only the store implementation may", name, imp)
					}
				}
			}
			for _, tr := range transport {
				if name == tr && strings.HasPrefix(imp, mod+"internal/store") {
					t.Errorf("transport %s imports %s; it must go through the domain", name, imp)
				}
			}
			if domain[name] && (imp == "net/http" || strings.HasPrefix(imp, "net/http/")) {
				t.Errorf("domain %s imports %s", name, imp)
			}
			if strings.HasPrefix(imp, mod+"cmd/") {
				t.Errorf("%s imports the command %s", name, imp)
			}
		}
		seen[name] = true
		if strings.HasPrefix(name, mod+"pkg/") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, mod+"internal/") {
					t.Errorf("public %s depends on %s", name, d)
				}
			}
		}
	}
	// A renamed or removed domain package must not drop out of the check.
	for d := range domain {
		if !seen[d] {
			t.Errorf("domain package %s not found; update the list", d)
		}
	}
}

// TestVerifierLinksNoIssuerWeight: the sidecar keeps no state, so no
// database driver and no Redis client belongs in it (database/sql itself
// comes with google/uuid's Scan and Value), and it hashes no password, so
// neither does the password package, whose strength dictionaries are 6.8
// MB of live heap from the start: under a 20 MiB soft memory limit they
// took the verifier's peak RSS past 25 MiB and its CPU per request up by a
// quarter to a half. Nor does any other package of the issuer's flows. It shares the
// configuration package with the issuer, which is how the Redis client and
// the password package once got in.
func TestVerifierLinksNoIssuerWeight(t *testing.T) {
	heavy := []string{"github.com/redis/go-redis", "github.com/go-redis/redis_rate",
		"github.com/jmoiron/sqlx", "github.com/lib/pq", "modernc.org/sqlite",
		"github.com/trustelem/zxcvbn"}
	for _, d := range []string{"argon2", "auth", "idempotency", "issuerapi", "issuerapp", "keys", "mail", "password", "token", "webhook"} {
		heavy = append(heavy, mod+"internal/"+d)
	}
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"cmd/verifier" {
			continue
		}
		for _, d := range p.Deps {
			for _, s := range heavy {
				if d == s || strings.HasPrefix(d, s+"/") {
					t.Errorf("the verifier links %s", d)
				}
			}
		}
		return
	}
	t.Fatal("cmd/verifier not found")
}
