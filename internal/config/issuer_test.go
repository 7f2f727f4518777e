package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// defaults returns an Issuer holding every serve flag's default.
func defaults(t *testing.T) *Issuer {
	t.Helper()
	var c Issuer
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.ServeFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return &c
}

func TestValidateDefaults(t *testing.T) {
	c := defaults(t)
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(defaults) = %v, want nil", err)
	}
	if err := c.ValidateServe(); err != nil {
		t.Errorf("ValidateServe(defaults) = %v, want nil", err)
	}
}

func TestValidateStoreFlagsDefaults(t *testing.T) {
	var c Issuer
	fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	c.StoreFlags(fs)
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(store defaults) = %v, want nil", err)
	}
}

func TestValidateEachField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Issuer)
		want   string
		serve  bool // only ValidateServe checks it
	}{
		{"database url scheme", func(c *Issuer) { c.DatabaseURL = "mysql://x" }, "--database-url", false},
		{"empty database url", func(c *Issuer) { c.DatabaseURL = "" }, "--database-url", false},
		{"kek file", func(c *Issuer) { c.KEKFile = "" }, "--kek-file", false},
		{"access ttl short", func(c *Issuer) { c.AccessTokenTTL = 59 * time.Second }, "--access-token-ttl", false},
		{"access ttl long", func(c *Issuer) { c.AccessTokenTTL = 25 * time.Hour }, "--access-token-ttl", false},
		{"clock skew negative", func(c *Issuer) { c.ClockSkew = -time.Second }, "--clock-skew", false},
		{"clock skew long", func(c *Issuer) { c.ClockSkew = 6 * time.Minute }, "--clock-skew", false},
		{"key reload", func(c *Issuer) { c.KeyReloadInterval = 0 }, "--key-reload-interval", false},
		{"log level", func(c *Issuer) { c.LogLevel = "verbose" }, "--log-level", false},
		{"listen", func(c *Issuer) { c.Listen = "" }, "--listen", true},
		{"issuer url relative", func(c *Issuer) { c.IssuerURL = "/issuer" }, "--issuer-url", true},
		{"issuer url scheme", func(c *Issuer) { c.IssuerURL = "ftp://host" }, "--issuer-url", true},
		{"issuer url trailing slash", func(c *Issuer) { c.IssuerURL = "https://auth.example.com/" }, "--issuer-url", true},
		{"audience", func(c *Issuer) { c.Audience = "" }, "--audience", true},
		{"refresh ttl short", func(c *Issuer) { c.RefreshTokenTTL = 59 * time.Minute }, "--refresh-token-ttl", true},
		{"refresh ttl long", func(c *Issuer) { c.RefreshTokenTTL = 91 * 24 * time.Hour }, "--refresh-token-ttl", true},
		{"session max lifetime zero", func(c *Issuer) { c.SessionMaxLifetime = 0 }, "--session-max-lifetime", true},
		{"session max lifetime negative", func(c *Issuer) { c.SessionMaxLifetime = -time.Hour }, "--session-max-lifetime", true},
		{"leeway negative", func(c *Issuer) { c.RefreshReuseLeeway = -time.Second }, "--refresh-reuse-leeway", true},
		{"leeway long", func(c *Issuer) { c.RefreshReuseLeeway = 6 * time.Minute }, "--refresh-reuse-leeway", true},
		{"jwks max age", func(c *Issuer) { c.JWKSMaxAge = 25 * time.Hour }, "--jwks-max-age", true},
		{"no admin listener address", func(c *Issuer) { c.AdminListen = "" }, "--admin-listen", true},
		{"a trusted proxy with host bits", func(c *Issuer) { c.TrustedProxies = []string{"10.0.0.1/0"} }, "--trusted-proxies", true},
		{"max body small", func(c *Issuer) { c.MaxBodyBytes = 1023 }, "--max-body-bytes", true},
		{"max body large", func(c *Issuer) { c.MaxBodyBytes = 10<<20 + 1 }, "--max-body-bytes", true},
		{"hash concurrency", func(c *Issuer) { c.HashConcurrency = -1 }, "--hash-concurrency", true},
		{"hash concurrency past its bound", func(c *Issuer) { c.HashConcurrency = 257 }, "--hash-concurrency", true},
		{"hash queue", func(c *Issuer) { c.HashQueue = -1 }, "--hash-queue", true},
		{"read header timeout zero", func(c *Issuer) { c.ReadHeaderTimeout = 0 }, "--read-header-timeout", true},
		{"read body timeout zero", func(c *Issuer) { c.ReadBodyTimeout = 0 }, "--read-body-timeout", true},
		{"read body timeout long", func(c *Issuer) { c.ReadBodyTimeout = 11 * time.Minute }, "--read-body-timeout", true},
		{"rate limit syntax", func(c *Issuer) { c.Overrides = []string{"login"} }, "--rate-limit", true},
		{"rate limit name", func(c *Issuer) { c.Overrides = []string{"logon=1/1m"} }, "--rate-limit", true},
		{"rate limit store", func(c *Issuer) { c.RateLimitStore = "redis" }, "--rate-limit-store", true},
		{"browser origin with path", func(c *Issuer) { c.BrowserOrigins = []string{"https://app.example.com/"} }, "--browser-origins", true},
		{"browser origin scheme", func(c *Issuer) { c.BrowserOrigins = []string{"app.example.com"} }, "--browser-origins", true},
		{"deprecation", func(c *Issuer) { c.DeprecatedVersions = []string{"v1"} }, "--deprecate-version", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t)
			tt.mutate(c)
			err := c.ValidateServe()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ValidateServe() = %v, want an error naming %s", err, tt.want)
			}
			err = c.Validate()
			switch {
			case tt.serve && err != nil:
				t.Errorf("Validate() = %v, want nil (a serve-only field)", err)
			case !tt.serve && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestValidateBoundaries(t *testing.T) {
	c := defaults(t)
	c.AccessTokenTTL = time.Minute
	c.ClockSkew = 5 * time.Minute
	c.KeyReloadInterval = time.Second
	c.RefreshTokenTTL = 90 * 24 * time.Hour
	c.RefreshReuseLeeway = 5 * time.Minute
	c.JWKSMaxAge = 0
	c.MaxBodyBytes = 10 << 20
	c.DatabaseURL = "postgresql://db/issuer"
	c.IssuerURL = "https://auth.example.com/tenant"
	c.LogLevel = "ERROR"
	if err := c.ValidateServe(); err != nil {
		t.Errorf("ValidateServe(boundary values) = %v, want nil", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := defaults(t)
	c.DatabaseURL = "mysql://x"
	c.KEKFile = ""
	c.AccessTokenTTL = 0
	c.LogLevel = "loud"
	c.Listen = ""
	c.IssuerURL = "nope"
	c.Audience = ""
	c.RefreshReuseLeeway = time.Hour
	c.MaxBodyBytes = 0
	c.HashConcurrency = -2
	err := c.ValidateServe()
	if err == nil {
		t.Fatal("ValidateServe(many bad fields) = nil, want an error")
	}
	for _, f := range []string{
		"--database-url", "--kek-file", "--access-token-ttl", "--log-level", "--listen",
		"--issuer-url", "--audience", "--refresh-reuse-leeway", "--max-body-bytes", "--hash-concurrency",
	} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("ValidateServe() = %q, want it to mention %s", err, f)
		}
	}
	for _, f := range []string{"--clock-skew", "--refresh-token-ttl", "--jwks-max-age", "--key-reload-interval"} {
		if strings.Contains(err.Error(), f) {
			t.Errorf("ValidateServe() = %q, mentions valid field %s", err, f)
		}
	}

	err = c.Validate()
	if err == nil {
		t.Fatal("Validate(many bad fields) = nil, want an error")
	}
	for _, f := range []string{"--database-url", "--kek-file", "--access-token-ttl", "--log-level"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %q, want it to mention %s", err, f)
		}
	}
}

func TestSharedRateLimits(t *testing.T) {
	tests := []struct {
		db, store string
		want      bool
	}{
		{"sqlite:x.db", "", false},
		{"postgres://db/issuer", "", true},
		{"sqlite:x.db", RateLimitStoreDatabase, true},
		{"postgres://db/issuer", RateLimitStoreMemory, false},
	}
	for _, tt := range tests {
		c := Issuer{Database: Database{DatabaseURL: tt.db}, RateLimits: RateLimits{RateLimitStore: tt.store}}
		if got := c.SharedRateLimits(); got != tt.want {
			t.Errorf("SharedRateLimits(%s, %q) = %v, want %v", tt.db, tt.store, got, tt.want)
		}
	}
}

func TestValidOrigin(t *testing.T) {
	for o, ok := range map[string]bool{
		"https://app.example.com": true, "http://localhost:8081": true,
		"https://app.example.com/": false, "app.example.com": false, "https://u@app.example.com": false,
		"https://app.example.com?x": false, "ftp://app.example.com": false, "": false,
	} {
		if err := ValidOrigin(o); (err == nil) != ok {
			t.Errorf("ValidOrigin(%q) = %v, want ok %v", o, err, ok)
		}
	}
}

func TestEmbedded(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{DefaultDatabaseURL, true},
		{"sqlite:/var/lib/issuer.db", true},
		{"postgres://db/issuer", false},
		{"postgresql://db/issuer", false},
		{"", false},
		{"SQLITE:x.db", false},
		{"file:sqlite:x.db", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c := Database{DatabaseURL: tt.url}
			if got := c.Embedded(); got != tt.want {
				t.Errorf("Embedded(%q) = %v, want %v", tt.url, got, tt.want)
			}
		})
	}
}

func TestParseLogLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"warn", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"INFO", slog.LevelInfo, false},
		{" Warn ", slog.LevelWarn, false},
		{"", 0, true},
		{"verbose", 0, true},
		{"trace", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLogLevel(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Errorf("ParseLogLevel(%q) = %v, nil, want an error", tt.in, got)
				} else if !strings.Contains(err.Error(), "--log-level") {
					t.Errorf("ParseLogLevel(%q) error = %q, want it to name --log-level", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseLogLevel(%q) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseLogLevelRejectsOffsets(t *testing.T) {
	for _, in := range []string{"info+2", "debug-4", "warn+100"} {
		if got, err := ParseLogLevel(in); err == nil {
			t.Errorf("ParseLogLevel(%q) = %v, nil, want an error", in, got)
		}
	}
}
