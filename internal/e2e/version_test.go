package e2e

import (
	"strings"
	"testing"
)

// A deprecated version announces itself on every response under its path,
// errors included; unversioned endpoints stay quiet.
func TestDeprecatedVersionHeaders(t *testing.T) {
	is := startIssuer(t, backends()[0].url(t),
		"--deprecate-version", "v1:deprecated=2026-11-01,sunset=2027-06-30,successor=https://auth.example.com/v2/")
	for _, r := range []response{
		do(t, "GET", is.base+"/v1/me", nil),
		do(t, "POST", is.base+"/v1/register", map[string]string{"email": uniqueEmail(), "password": strongPassword}),
		do(t, "GET", is.base+"/v1/no-such-thing", nil),
	} {
		for name, want := range map[string]string{
			"Deprecation": "@1793491200",
			"Sunset":      "Wed, 30 Jun 2027 00:00:00 GMT",
			"Link":        `<https://auth.example.com/v2/>; rel="successor-version"`,
		} {
			if got := r.header.Get(name); got != want {
				t.Errorf("status %d answer: %s = %q, want %q", r.status, name, got, want)
			}
		}
	}
	if r := do(t, "GET", is.base+"/health", nil); r.header.Get("Deprecation") != "" {
		t.Errorf("GET /health: Deprecation = %q, want none", r.header.Get("Deprecation"))
	}
	// A bad value stops the issuer at start with a message naming the flag.
	out, err := is.cli(t, "", "serve", "--listen", "127.0.0.1:0", "--deprecate-version", "v1:sunset=2027-06-30")
	if err == nil || !strings.Contains(out, "--deprecate-version") {
		t.Errorf("serve with a bad --deprecate-version: err %v, output %q; want a refusal naming the flag", err, out)
	}
}
