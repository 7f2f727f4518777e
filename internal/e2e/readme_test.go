package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail/mailtest"
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
	script := shBlock(t, string(raw), "## Walkthrough")
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

// TestReadmeMailAndAdmin runs the README's "Account mail" and "Admin API
// and CLI" examples as one script, verbatim except for the port, the
// binary's path (the test built it; `make build` is dropped) and the
// database and key files, given through the environment as an operator
// would.
func TestReadmeMailAndAdmin(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: README mail and admin examples not run", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	script := shBlock(t, readme, "### Account mail") + shBlock(t, readme, "### Admin API and CLI")
	if !strings.Contains(script, "make build\n") || !strings.Contains(script, "kill %1") {
		t.Fatalf("the examples changed shape; update this test:\n%s", script)
	}
	script = strings.Replace(script, "make build\n", "", 1)
	addr := mailtest.FreeAddr(t)
	script = strings.ReplaceAll(script, "localhost:8080", addr)
	script = strings.ReplaceAll(script, "./bin/issuer", filepath.Join(binDir, "issuer"))

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Should the script stop early, the issuer it started must not outlive it.
	script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"ISSUER_LISTEN="+addr, "ISSUER_ADMIN_LISTEN=127.0.0.1:0",
		"ISSUER_DATABASE_URL=sqlite:"+dir+"/issuer.db", "ISSUER_KEK_FILE="+kekFile(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "issuer.log"))
		t.Fatalf("examples failed: %v\n%s\nissuer log:\n%s", err, out, log)
	}
	text := string(out)
	for _, want := range []string{
		`"email":"grace@example.com"`,                            // register, admin users list
		`"items":[`,                                              // admin API lists
		"disabled: user ", "enabled: user ", "role admin: user ", // CLI writes
		`"type":"user.disabled"`, // audit list --json
	} {
		if !strings.Contains(text, want) {
			t.Errorf("examples' output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "204\n"); n != 2 {
		t.Errorf("examples' output has %d lines 204, want 2 (verify, reset):\n%s", n, text)
	}
	if strings.Contains(text, `"code":`) {
		t.Errorf("examples' output contains an error:\n%s", text)
	}
}

// shBlock returns the first sh block after the heading.
func shBlock(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```sh\n")
	if start < 0 {
		t.Fatalf("%s has no sh block", heading)
	}
	rest = rest[start+len("```sh\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatal("unterminated sh block")
	}
	return rest[:end]
}
