package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// leaves returns every runnable command under root by its path
// ("keys rotate").
func leaves(root *cobra.Command) map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.RunE != nil {
			out[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")] = c
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// TestCommandsRegisterTheirParts checks that each command has the flags of
// the configuration parts it uses and no others: every command that opens
// the database has the database, key and log flags; the mail link
// lifetimes belong to the commands that may queue a mail; serve alone has
// the listener, mail-delivery and schedule flags.
func TestCommandsRegisterTheirParts(t *testing.T) {
	base := []string{"database-url", "kek-file", "access-token-ttl", "clock-skew", "key-reload-interval", "log-level"}
	serveOnly := []string{"listen", "mail-mode", "jwks-max-age", "key-rotation-interval", "webhook-timeout", "rate-limit", "hash-concurrency", "no-migrate", "issuer-url"}
	extra := map[string][]string{
		"serve":           {"reset-token-ttl", "verify-token-ttl", "activate-in", "webhook-allow-cidr"},
		"users create":    {"reset-token-ttl", "verify-token-ttl"},
		"keys rotate":     {"activate-in"},
		"webhooks create": {"webhook-allow-cidr"},
	}
	optional := []string{"reset-token-ttl", "verify-token-ttl", "activate-in", "webhook-allow-cidr"}
	cmds := leaves(newRootCmd(nil))
	if len(cmds) < 15 {
		t.Fatalf("found %d commands; the check would prove little", len(cmds))
	}
	for path, c := range cmds {
		if path == "version" {
			continue
		}
		has := func(name string) bool { return c.Flags().Lookup(name) != nil }
		for _, f := range base {
			if !has(f) {
				t.Errorf("%s: no --%s, want every database flag", path, f)
			}
		}
		for _, f := range serveOnly {
			if has(f) != (path == "serve") {
				t.Errorf("%s: has --%s = %v, want %v", path, f, has(f), path == "serve")
			}
		}
		want := map[string]bool{}
		for _, f := range extra[path] {
			want[f] = true
		}
		for _, f := range optional {
			if has(f) != want[f] {
				t.Errorf("%s: has --%s = %v, want %v", path, f, has(f), want[f])
			}
		}
	}
}

func TestKeysRotateHelpOmitsMailLinks(t *testing.T) {
	root := newRootCmd(nil)
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"keys", "rotate", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatalf("keys rotate --help: %v", err)
	}
	help := out.String()
	if !strings.Contains(help, "--activate-in") {
		t.Errorf("keys rotate --help lacks --activate-in:\n%s", help)
	}
	for _, f := range []string{"--reset-token-ttl", "--verify-token-ttl", "--mail-mode"} {
		if strings.Contains(help, f) {
			t.Errorf("keys rotate --help lists %s:\n%s", f, help)
		}
	}
}
