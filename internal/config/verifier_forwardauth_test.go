package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestVerifierValidateForwardAuthHeaders(t *testing.T) {
	base := []string{"--jwks-url", "http://issuer/jwks", "--issuer", "http://issuer", "--audience", "api"}
	forward := append([]string{"--mode", "forward-auth"}, base...)
	proxy := append([]string{"--upstream", "http://app"}, base...)
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"forward-auth without a contract", forward, "--forward-auth-headers is required"},
		{"unknown contract", append([]string{"--forward-auth-headers", "haproxy"}, forward...), "--forward-auth-headers must be"},
		{"envoy", append([]string{"--forward-auth-headers", "envoy"}, forward...), ""},
		{"nginx without trusted proxies", append([]string{"--forward-auth-headers", "nginx"}, forward...), "needs --trusted-proxies"},
		{"nginx", append([]string{"--forward-auth-headers", "nginx", "--trusted-proxies", "127.0.0.1/32"}, forward...), ""},
		{"traefik", append([]string{"--forward-auth-headers", "traefik", "--trusted-proxies", "10.0.0.0/8"}, forward...), ""},
		{"caddy", append([]string{"--forward-auth-headers", "caddy", "--trusted-proxies", "127.0.0.1"}, forward...), ""},
		{"contract in proxy mode", append([]string{"--forward-auth-headers", "nginx"}, proxy...), "only in forward-auth mode"},
		{"issuer path", append([]string{"--issuer-path", "/v1/*"}, proxy...), ""},
		{"bad issuer path", append([]string{"--issuer-path", "/v1*"}, proxy...), "--issuer-path"},
		{"issuer path in forward-auth mode", append([]string{"--issuer-path", "/v1/*", "--forward-auth-headers", "envoy"}, forward...), "--issuer-path is used only in proxy mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Verifier
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			c.ServeFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := c.ValidateServe()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateServe(%q) = %v, want nil", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateServe(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}
