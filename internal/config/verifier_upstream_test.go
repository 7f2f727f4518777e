package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestVerifierValidateUpstreamProtocol(t *testing.T) {
	base := []string{"--jwks-url", "http://issuer/jwks", "--issuer", "http://issuer", "--audience", "api"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" for valid
		// proto is the protocol parsed, checked when valid
		proto string
	}{
		{"default http1", []string{"--upstream", "http://app"}, nil, "", "http1"},
		{"h2c", []string{"--upstream", "http://app", "--upstream-protocol", "h2c"}, nil, "", "h2c"},
		{"h2c from env", []string{"--upstream", "http://app"}, map[string]string{"VERIFIER_UPSTREAM_PROTOCOL": "h2c"}, "", "h2c"},
		{"flag beats env", []string{"--upstream", "http://app", "--upstream-protocol", "http1"}, map[string]string{"VERIFIER_UPSTREAM_PROTOCOL": "h2c"}, "", "http1"},
		{"unknown", []string{"--upstream", "http://app", "--upstream-protocol", "h3"}, nil, "--upstream-protocol must be http1 or h2c", ""},
		{"h2c over https", []string{"--upstream", "https://app", "--upstream-protocol", "h2c"}, nil, "needs an http:// --upstream", ""},
		{"h2c over HTTPS", []string{"--upstream", "HTTPS://app", "--upstream-protocol", "h2c"}, nil, "needs an http:// --upstream", ""},
		{"a path prefix", []string{"--upstream", "http://app/base"}, nil, "", "http1"},
		{"credentials", []string{"--upstream", "http://bob:secret@app"}, nil, "no user, query or fragment", ""},
		{"a query", []string{"--upstream", "http://app/?admin=1"}, nil, "no user, query or fragment", ""},
		{"a fragment", []string{"--upstream", "http://app/#x"}, nil, "no user, query or fragment", ""},
		{"no admin listener address", []string{"--upstream", "http://app", "--admin-listen", ""}, nil, "--admin-listen is required", ""},
		{"a trusted proxy with host bits", []string{"--upstream", "http://app", "--trusted-proxies", "10.0.0.1/0"}, nil, "--trusted-proxies", ""},
		{"a public path prefix", []string{"--upstream", "http://app", "--public-path", "/static/*", "--public-path", "/healthz"}, nil, "", "http1"},
		{"a public path that never matches", []string{"--upstream", "http://app", "--public-path", "/static/..;/x"}, nil, "can never match", ""},
		{"a public prefix that never matches", []string{"--upstream", "http://app", "--public-path", "/a%2Fb/*"}, nil, "can never match", ""},
		{"a public path not starting with /", []string{"--upstream", "http://app", "--public-path", "static/*"}, nil, "must start with /", ""},
		{"an issuer path that never matches", []string{"--upstream", "http://app", "--issuer-path", "//v1/*"}, nil, "can never match", ""},
		{"a blank trusted proxy", []string{"--upstream", "http://app", "--trusted-proxies", " "}, nil, "--trusted-proxies", ""},
		{"pings to an h2c app", []string{"--upstream", "http://app", "--upstream-protocol", "h2c", "--upstream-ping-interval", "30s"}, nil, "", "h2c"},
		{"pings from env", []string{"--upstream", "http://app"}, map[string]string{"VERIFIER_UPSTREAM_PING_INTERVAL": "30s"}, "needs --upstream-protocol h2c", ""},
		{"pings to an HTTP/1.1 app", []string{"--upstream", "http://app", "--upstream-ping-interval", "30s"}, nil, "needs --upstream-protocol h2c", ""},
		{"pings in forward-auth", []string{"--mode", "forward-auth", "--forward-auth-headers", "envoy", "--upstream-ping-interval", "30s"}, nil, "needs --upstream-protocol h2c", ""},
		{"pings too often", []string{"--upstream", "http://app", "--upstream-protocol", "h2c", "--upstream-ping-interval", "10ms"}, nil, "at least 1s", ""},
		{"negative pings", []string{"--upstream", "http://app", "--upstream-protocol", "h2c", "--upstream-ping-interval", "-1s"}, nil, "must not be negative", ""},
		{"h2c in forward-auth", []string{"--mode", "forward-auth", "--forward-auth-headers", "envoy", "--upstream-protocol", "h2c"}, nil, "used only in proxy mode", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Verifier
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			c.ServeFlags(fs)
			if err := fs.Parse(append(append([]string{}, base...), tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := ApplyEnv(fs, "VERIFIER", func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }); err != nil {
				t.Fatal(err)
			}
			err := c.ValidateServe()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateServe(%q) = %v, want nil", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateServe(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			case tc.want == "" && c.UpstreamProtocol != tc.proto:
				t.Errorf("UpstreamProtocol after %q = %q, want %q", tc.args, c.UpstreamProtocol, tc.proto)
			}
		})
	}
}
