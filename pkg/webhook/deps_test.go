package webhook_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies enforces the rule of API.md section 5: pkg/webhook
// imports only the standard library.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	const self = "github.com/palisade-auth/palisade/pkg/webhook"
	out, err := exec.Command(goCmd, "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, self).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != self {
			t.Errorf("%s depends on %s; want the standard library only", self, dep)
		}
	}
}
