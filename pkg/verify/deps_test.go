package verify_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies enforces the rule of DESIGN.md: pkg/verify imports only
// the standard library, jwx and singleflight, never the module's internal
// packages.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	const self = "github.com/palisade-auth/palisade/pkg/verify"
	out, err := exec.Command(goCmd, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, self, self+"/verifytest").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case !strings.Contains(first, "."): // standard library
			case strings.HasPrefix(imp, "github.com/lestrrat-go/jwx/v2"):
			case imp == "golang.org/x/sync/singleflight":
			case imp == self:
			default:
				t.Errorf("%s imports %s; want only the standard library, jwx, singleflight and %s", f[0], imp, self)
			}
		}
	}
}
