package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReadmeWalkthrough runs the README's walkthrough, verbatim except for
// the port, against the real issuer on the embedded default database.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: README walkthrough not run", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := walkthroughBlock(t, string(raw))
	is := startIssuer(t, "sqlite:"+t.TempDir()+"/issuer.db")
	script = strings.ReplaceAll(script, "localhost:8080", is.proc.addr["api"])
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		`"email":"ada@example.com"`, // register and /me
		`"sessions":[`,              // sessions
		"204",                       // logout
		`"keys":[`,                  // jwks
	} {
		if !strings.Contains(text, want) {
			t.Errorf("walkthrough output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `"code":`) {
		t.Errorf("walkthrough output contains an error:\n%s", text)
	}
}

// walkthroughBlock returns the first sh block under "## Walkthrough".
func walkthroughBlock(t *testing.T, readme string) string {
	t.Helper()
	i := strings.Index(readme, "## Walkthrough")
	if i < 0 {
		t.Fatal("README has no Walkthrough section")
	}
	rest := readme[i:]
	start := strings.Index(rest, "```sh\n")
	if start < 0 {
		t.Fatal("Walkthrough has no sh block")
	}
	rest = rest[start+len("```sh\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatal("unterminated sh block")
	}
	return rest[:end]
}
