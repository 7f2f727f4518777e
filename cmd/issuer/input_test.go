package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/text"
)

// TestCLIInputHitsTextCheck: a command's flags, arguments and flags given
// by the environment meet the one storage check (text.Check) before the
// command runs: the database URL here would fail to open if it were reached.
func TestCLIInputHitsTextCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   [2]string
		field string
	}{
		{"flag NUL", []string{"users", "list", "--email", "a\x00b"}, [2]string{}, "--email"},
		{"flag invalid UTF-8", []string{"audit", "list", "--type", "\xff"}, [2]string{}, "--type"},
		{"argument NUL", []string{"users", "disable", "u\x00"}, [2]string{}, "argument"},
		{"argument invalid UTF-8", []string{"webhooks", "deliveries", "\xc3\x28"}, [2]string{}, "argument"},
		{"environment", []string{"users", "list"}, [2]string{"ISSUER_EMAIL", "\xfe"}, "--email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ISSUER_DATABASE_URL", "sqlite:"+t.TempDir()+"/never-opened/db")
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			root := newRootCmd(nil)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tc.args)
			err := root.Execute()
			want := apperr.As(text.Check(tc.field, "\x00")).Fields[0]
			if err == nil || !strings.Contains(err.Error(), want.Field+": "+want.Message) {
				t.Fatalf("issuer %q = %v, want the check's refusal of %s", tc.args, err, tc.field)
			}
			if out.Len() != 0 {
				t.Errorf("issuer %q printed %q before refusing", tc.args, out.String())
			}
		})
	}
}
