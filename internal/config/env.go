// Package config owns the programs' configuration: the settings structs,
// their flags, the environment variables that back every flag, and their
// validation, which reports every problem at once. The issuer's
// configuration is made of one part per concern (Database, Keys,
// KeySchedule, Log, HTTP, API, Tokens, Passwords, RateLimits, Mail,
// MailLinks, Webhooks, WebhookGuard), each registering its own flags and
// validating itself, so that a command registers only the parts it uses;
// values that need parsing are parsed once, by the validation.
package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName is the variable that backs a flag: PREFIX_ plus the flag name in
// upper snake case (--refresh-token-ttl -> ISSUER_REFRESH_TOKEN_TTL).
func EnvName(prefix, flag string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag the command line did not set from its
// environment variable, so precedence is flag > environment > default.
// Repeatable flags take a comma-separated list.
func ApplyEnv(fs *pflag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		name := EnvName(prefix, f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		var err error
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			var items []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					items = append(items, s)
				}
			}
			err = sv.Replace(items)
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			return
		}
		f.Changed = true
	})
	if len(errs) > 0 {
		return fmt.Errorf("config: invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// AnnotateEnv appends the backing variable to every flag's help text.
func AnnotateEnv(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !strings.Contains(f.Usage, "[$") {
			f.Usage += " [$" + EnvName(prefix, f.Name) + "]"
		}
	})
}
