package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadmeWebhooks runs the README's webhook registration example,
// verbatim except for the port, the binary's path and the database and key
// files (given through the environment, as an operator would), against a
// real issuer with the admin of the "Admin API and CLI" example.
func TestReadmeWebhooks(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: README webhook example not run", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := shBlock(t, string(raw), "### Registering an endpoint")
	is := startIssuer(t, "sqlite:"+t.TempDir()+"/issuer.db")
	if out, err := is.cli(t, "the admin passphrase, long enough\n", "users", "create", "--email", "root@example.com", "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create: %v\n%s", err, out)
	}
	script = strings.ReplaceAll(script, "localhost:8080", is.addr["api"])
	script = strings.ReplaceAll(script, "./bin/issuer", filepath.Join(binDir, "issuer"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// pipefail, as a careful operator's shell has it: a pipe whose reader
	// stops early (head) would kill the writer with SIGPIPE now and then.
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "ISSUER_DATABASE_URL="+is.dbURL, "ISSUER_KEK_FILE="+is.kek)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		`"url":"https://hooks.example.com/palisade"`, `"secret":"`, // API registration
		"created webhook ", "secret: whsec_", // CLI registration
		"https://hooks.example.com/audit", // list
		`"items":[`,                       // deliveries
		`"status":"disabled"`,             // patch
		"rotated the secret of webhook ",  // rotate-secret
	} {
		if !strings.Contains(text, want) {
			t.Errorf("example's output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `"code":`) {
		t.Errorf("example's output contains an error:\n%s", text)
	}
}
