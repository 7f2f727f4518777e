package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestVerifierValidateRevocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"off", nil, ""},
		{"defaults", []string{"--revocation-url", "http://issuer/v1/revocations"}, ""},
		{"fail closed", []string{"--revocation-url", "https://issuer/v1/revocations", "--revocation-fail-closed", "--revocation-poll-interval", "200ms", "--revocation-max-staleness", "1s"}, ""},
		{"relative url", []string{"--revocation-url", "/v1/revocations"}, "--revocation-url"},
		{"fail closed without url", []string{"--revocation-fail-closed"}, "--revocation-url"},
		{"zero poll", []string{"--revocation-url", "http://issuer/r", "--revocation-poll-interval", "0s"}, "--revocation-poll-interval"},
		{"staleness below poll", []string{"--revocation-url", "http://issuer/r", "--revocation-poll-interval", "10s", "--revocation-max-staleness", "5s"}, "--revocation-max-staleness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Verifier
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			c.ServeFlags(fs)
			args := append([]string{"--jwks-url", "http://issuer/jwks", "--issuer", "http://issuer", "--audience", "api", "--upstream", "http://app"}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := c.ValidateServe()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateServe(%q) = %v, want nil", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateServe(%q) = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
	var c Verifier
	c.ServeFlags(pflag.NewFlagSet("serve", pflag.ContinueOnError))
	if c.RevocationPollInterval != 5*time.Second || c.RevocationMaxStaleness != time.Minute || c.RevocationFailClosed {
		t.Errorf("defaults = %v, %v, %v, want 5s, 1m, false", c.RevocationPollInterval, c.RevocationMaxStaleness, c.RevocationFailClosed)
	}
}
