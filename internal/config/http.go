package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/apiversion"
	"github.com/palisade-auth/palisade/internal/clientip"
)

// HTTP is the issuer's listeners and what they accept of a request.
type HTTP struct {
	Listen            string
	AdminListen       string
	TrustedProxies    []string
	MaxBodyBytes      int64
	ReadHeaderTimeout time.Duration
	ReadBodyTimeout   time.Duration
}

// Flags registers the listener flags.
func (h *HTTP) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&h.Listen, "listen", ":8080", "address of the API listener")
	fs.StringVar(&h.AdminListen, "admin-listen", "127.0.0.1:9090", "address of the admin listener (metrics)")
	fs.StringSliceVar(&h.TrustedProxies, "trusted-proxies", nil, "CIDRs of proxies whose X-Forwarded-For is believed (repeatable or comma-separated)")
	fs.Int64Var(&h.MaxBodyBytes, "max-body-bytes", 64<<10, "largest accepted request body")
	fs.DurationVar(&h.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's headers")
	fs.DurationVar(&h.ReadBodyTimeout, "read-body-timeout", 30*time.Second, "time a client has to send a request's whole body once its headers are in; a slower body ends the request with 408 and the connection is closed")
}

// Validate checks the part.
func (h *HTTP) Validate() error {
	var p problems
	if h.Listen == "" {
		p.addf("--listen is required")
	}
	if h.AdminListen == "" {
		// net.Listen would take "" as every interface, metrics and all.
		p.addf("--admin-listen is required")
	}
	if _, err := clientip.New(h.TrustedProxies); err != nil {
		p.addf("--trusted-proxies: %v", err)
	}
	if h.MaxBodyBytes < 1024 || h.MaxBodyBytes > 10<<20 {
		p.addf("--max-body-bytes must be between 1024 and 10485760, got %d", h.MaxBodyBytes)
	}
	if h.ReadHeaderTimeout <= 0 || h.ReadHeaderTimeout > 10*time.Minute {
		p.addf("--read-header-timeout must be above 0 and at most 10m, got %s", h.ReadHeaderTimeout)
	}
	if h.ReadBodyTimeout <= 0 || h.ReadBodyTimeout > 10*time.Minute {
		p.addf("--read-body-timeout must be above 0 and at most 10m, got %s", h.ReadBodyTimeout)
	}
	return p.err()
}

// API is what the issuer's API offers browsers and announces about its
// versions.
type API struct {
	BrowserOrigins     []string
	DeprecatedVersions []string
	Demo               bool
	deprecations       []apiversion.Deprecation
}

// Flags registers the API flags.
func (a *API) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&a.BrowserOrigins, "browser-origins", nil, "origins (scheme://host[:port]) of browser apps: their logins and refreshes get the tokens in HttpOnly cookies, and only they pass the CSRF origin check (repeatable or comma-separated)")
	fs.StringArrayVar(&a.DeprecatedVersions, "deprecate-version", nil, "mark an API version deprecated: VERSION:deprecated=DATE[,sunset=DATE][,successor=URL] (repeatable; adds Deprecation, Sunset and Link headers to its responses)")
	fs.BoolVar(&a.Demo, "demo", false, "serve the browser demo page at /demo/ (development only; see the README)")
}

// Validate checks the part and keeps the parsed deprecations.
func (a *API) Validate() error {
	var p problems
	for _, o := range a.BrowserOrigins {
		if err := ValidOrigin(o); err != nil {
			p.addf("--browser-origins: %v", err)
		}
	}
	a.deprecations = nil
	for _, s := range a.DeprecatedVersions {
		d, err := apiversion.Parse(s)
		if err != nil {
			p.addf("--deprecate-version: %v", err)
			continue
		}
		a.deprecations = append(a.deprecations, d)
	}
	return p.err()
}

// Deprecations are the versions --deprecate-version marked, as Validate
// parsed them.
func (a *API) Deprecations() []apiversion.Deprecation { return a.deprecations }

// ValidOrigin checks that o is a serialized origin as browsers send it in
// the Origin header: scheme://host[:port], nothing more.
func ValidOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.String() != o {
		return fmt.Errorf("%q is not an origin like https://app.example.com", o)
	}
	return nil
}
