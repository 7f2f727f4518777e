package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestEnvName(t *testing.T) {
	tests := []struct {
		prefix, flag, want string
	}{
		{"ISSUER", "refresh-reuse-leeway", "ISSUER_REFRESH_REUSE_LEEWAY"},
		{"ISSUER", "listen", "ISSUER_LISTEN"},
		{"VERIFIER", "jwks-url", "VERIFIER_JWKS_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			if got := EnvName(tt.prefix, tt.flag); got != tt.want {
				t.Errorf("EnvName(%q, %q) = %q, want %q", tt.prefix, tt.flag, got, tt.want)
			}
		})
	}
}

// mapLookup is an os.LookupEnv over a fixed map, so tests never touch the
// process environment.
func mapLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// serveFlags returns the serve flag set after parsing args and applying env.
func serveFlags(t *testing.T, args []string, env map[string]string) (*Issuer, error) {
	t.Helper()
	var c Issuer
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.ServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return &c, ApplyEnv(fs, "ISSUER", mapLookup(env))
}

func TestApplyEnvPrecedence(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantTTL   time.Duration
		wantAud   string
		wantLevel string
	}{
		{
			name:    "defaults when neither",
			wantTTL: 15 * time.Minute, wantAud: "api", wantLevel: "info",
		},
		{
			name:    "env when flag not set",
			env:     map[string]string{"ISSUER_ACCESS_TOKEN_TTL": "5m", "ISSUER_AUDIENCE": "orders", "ISSUER_LOG_LEVEL": "debug"},
			wantTTL: 5 * time.Minute, wantAud: "orders", wantLevel: "debug",
		},
		{
			name:    "flag beats env",
			args:    []string{"--access-token-ttl=2m", "--audience", "billing"},
			env:     map[string]string{"ISSUER_ACCESS_TOKEN_TTL": "5m", "ISSUER_AUDIENCE": "orders", "ISSUER_LOG_LEVEL": "warn"},
			wantTTL: 2 * time.Minute, wantAud: "billing", wantLevel: "warn",
		},
		{
			name:    "unrelated env ignored",
			env:     map[string]string{"VERIFIER_AUDIENCE": "x", "AUDIENCE": "y", "ISSUER_HELP": "true"},
			wantTTL: 15 * time.Minute, wantAud: "api", wantLevel: "info",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := serveFlags(t, tt.args, tt.env)
			if err != nil {
				t.Fatalf("ApplyEnv: %v", err)
			}
			if c.AccessTokenTTL != tt.wantTTL {
				t.Errorf("AccessTokenTTL = %s, want %s", c.AccessTokenTTL, tt.wantTTL)
			}
			if c.Audience != tt.wantAud {
				t.Errorf("Audience = %q, want %q", c.Audience, tt.wantAud)
			}
			if c.LogLevel != tt.wantLevel {
				t.Errorf("LogLevel = %q, want %q", c.LogLevel, tt.wantLevel)
			}
		})
	}
}

func TestApplyEnvMarksChanged(t *testing.T) {
	var c Issuer
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.ServeFlags(fs)
	if err := ApplyEnv(fs, "ISSUER", mapLookup(map[string]string{"ISSUER_NO_MIGRATE": "true"})); err != nil {
		t.Fatalf("ApplyEnv: %v", err)
	}
	if !c.NoMigrate {
		t.Errorf("NoMigrate = false, want true")
	}
	if !fs.Changed("no-migrate") {
		t.Errorf("Changed(no-migrate) = false after env, want true")
	}
	if fs.Changed("listen") {
		t.Errorf("Changed(listen) = true without env, want false")
	}
}

func TestApplyEnvSlice(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want []string
	}{
		{"comma separated", nil, "10.0.0.0/8,192.168.0.0/16", []string{"10.0.0.0/8", "192.168.0.0/16"}},
		{"spaces and empty items", nil, " 10.0.0.0/8 , ,127.0.0.1/32,", []string{"10.0.0.0/8", "127.0.0.1/32"}},
		{"single", nil, "10.0.0.0/8", []string{"10.0.0.0/8"}},
		{"flag beats env", []string{"--trusted-proxies=172.16.0.0/12"}, "10.0.0.0/8", []string{"172.16.0.0/12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := serveFlags(t, tt.args, map[string]string{"ISSUER_TRUSTED_PROXIES": tt.env})
			if err != nil {
				t.Fatalf("ApplyEnv: %v", err)
			}
			if strings.Join(c.TrustedProxies, "|") != strings.Join(tt.want, "|") {
				t.Errorf("TrustedProxies from %q = %q, want %q", tt.env, c.TrustedProxies, tt.want)
			}
		})
	}
}

func TestApplyEnvBadValue(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"duration", map[string]string{"ISSUER_ACCESS_TOKEN_TTL": "abc"}, []string{"ISSUER_ACCESS_TOKEN_TTL"}},
		{"int", map[string]string{"ISSUER_MAX_BODY_BYTES": "lots"}, []string{"ISSUER_MAX_BODY_BYTES"}},
		{"bool", map[string]string{"ISSUER_NO_MIGRATE": "maybe"}, []string{"ISSUER_NO_MIGRATE"}},
		{
			"every bad variable reported",
			map[string]string{"ISSUER_ACCESS_TOKEN_TTL": "abc", "ISSUER_HASH_CONCURRENCY": "x", "ISSUER_AUDIENCE": "fine"},
			[]string{"ISSUER_ACCESS_TOKEN_TTL", "ISSUER_HASH_CONCURRENCY"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := serveFlags(t, nil, tt.env)
			if err == nil {
				t.Fatalf("ApplyEnv(%v) = nil, want an error", tt.env)
			}
			for _, name := range tt.want {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("ApplyEnv(%v) = %q, want it to name %s", tt.env, err, name)
				}
			}
			if strings.Contains(err.Error(), "ISSUER_AUDIENCE") {
				t.Errorf("ApplyEnv(%v) = %q, names a valid variable", tt.env, err)
			}
		})
	}
}

func TestApplyEnvBadValueOnSetFlagIgnored(t *testing.T) {
	// The command line wins, so a bad value in a shadowed variable is moot.
	c, err := serveFlags(t, []string{"--access-token-ttl=3m"}, map[string]string{"ISSUER_ACCESS_TOKEN_TTL": "abc"})
	if err != nil {
		t.Fatalf("ApplyEnv with the flag set = %v, want nil", err)
	}
	if c.AccessTokenTTL != 3*time.Minute {
		t.Errorf("AccessTokenTTL = %s, want 3m", c.AccessTokenTTL)
	}
}

func TestApplyEnvStoreFlags(t *testing.T) {
	var c Issuer
	fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	c.StoreFlags(fs)
	env := map[string]string{
		"ISSUER_DATABASE_URL": "postgres://db/issuer",
		"ISSUER_LISTEN":       ":1", // not a store flag: ignored
	}
	if err := ApplyEnv(fs, "ISSUER", mapLookup(env)); err != nil {
		t.Fatalf("ApplyEnv: %v", err)
	}
	if c.DatabaseURL != "postgres://db/issuer" {
		t.Errorf("DatabaseURL = %q, want postgres://db/issuer", c.DatabaseURL)
	}
	if c.Listen != "" {
		t.Errorf("Listen = %q, want empty (not a store flag)", c.Listen)
	}
}

func TestAnnotateEnv(t *testing.T) {
	var c Issuer
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.ServeFlags(fs)
	fs.BoolP("help", "h", false, "help for serve")
	AnnotateEnv(fs, "ISSUER")
	AnnotateEnv(fs, "ISSUER") // idempotent

	fs.VisitAll(func(f *pflag.Flag) {
		want := "[$" + EnvName("ISSUER", f.Name) + "]"
		n := strings.Count(f.Usage, want)
		if f.Name == "help" {
			if n != 0 {
				t.Errorf("help usage = %q, want no variable", f.Usage)
			}
			return
		}
		if n != 1 {
			t.Errorf("%s usage = %q, want %s once", f.Name, f.Usage, want)
		}
	})
	if u := fs.FlagUsages(); !strings.Contains(u, "[$ISSUER_REFRESH_REUSE_LEEWAY]") {
		t.Errorf("FlagUsages() lacks [$ISSUER_REFRESH_REUSE_LEEWAY]:\n%s", u)
	}
}
