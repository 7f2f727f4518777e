package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestKeysRevokeTakesAKIDThatLooksLikeAFlag: one KID in 64 begins with
// "-". After -- it reaches the service (here: no such key); without, the
// refusal says to put -- before it.
func TestKeysRevokeTakesAKIDThatLooksLikeAFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ISSUER_DATABASE_URL", "sqlite:"+dir+"/db")
	t.Setenv("ISSUER_KEK_FILE", dir+"/kek")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "revoke", "--", "-5lDabc"}, "No such signing key"},
		{[]string{"keys", "revoke", "-5lDabc"}, `a KID that begins with "-" goes after --`},
	} {
		root := newRootCmd(nil)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("issuer %q = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
