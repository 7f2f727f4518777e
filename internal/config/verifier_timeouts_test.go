package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestVerifierValidateTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Verifier)
		want   string // "" for valid
	}{
		{"defaults", func(*Verifier) {}, ""},
		{"header zero", func(c *Verifier) { c.ReadHeaderTimeout = 0 }, "--read-header-timeout"},
		{"idle zero", func(c *Verifier) { c.ReadIdleTimeout = 0 }, "--read-idle-timeout"},
		{"idle long", func(c *Verifier) { c.ReadIdleTimeout = 11 * time.Minute }, "--read-idle-timeout"},
		{"min rate off", func(c *Verifier) { c.ReadMinRate = 0 }, ""},
		{"min rate negative", func(c *Verifier) { c.ReadMinRate = -1 }, "--read-min-rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Verifier
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			c.ServeFlags(fs)
			if err := fs.Parse([]string{"--jwks-url", "http://issuer/jwks", "--issuer", "http://issuer", "--audience", "api", "--upstream", "http://app"}); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&c)
			err := c.ValidateServe()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateServe() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateServe() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
