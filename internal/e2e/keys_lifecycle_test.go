package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// keyObject is the admin API's key object.
type keyObject struct {
	KID         string  `json:"kid"`
	State       string  `json:"state"`
	CreatedAt   string  `json:"created_at"`
	ActivatesAt *string `json:"activates_at"`
	RetiresAt   *string `json:"retires_at"`
	RevokedAt   *string `json:"revoked_at"`
}

// keyStates maps kid -> state of a key list.
func keyStates(ks []keyObject) map[string]string {
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		out[k.KID] = k.State
	}
	return out
}

// adminKeys reads GET /v1/admin/keys.
func adminKeys(t *testing.T, is *issuer, access string) []keyObject {
	t.Helper()
	r := do(t, "GET", is.base+"/v1/admin/keys", nil, bearer(access)...)
	wantStatus(t, "GET /v1/admin/keys", r, http.StatusOK)
	var list struct {
		Keys []keyObject `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatalf("GET /v1/admin/keys body %s: %v", r.body, err)
	}
	return list.Keys
}

// cliKeys reads issuer keys list --json.
func cliKeys(t *testing.T, is *issuer) []keyObject {
	t.Helper()
	out, err := is.cli(t, "", "keys", "list", "--json")
	if err != nil {
		t.Fatalf("keys list --json: %v\n%s", err, out)
	}
	var ks []keyObject
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var k keyObject
		if err := json.Unmarshal([]byte(line), &k); err != nil {
			t.Fatalf("keys list --json line %q: %v", line, err)
		}
		ks = append(ks, k)
	}
	return ks
}

// waitFor polls cond until it holds or 30 s have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newAdmin creates an admin with the CLI and logs in; it returns the
// tokens, the admin's id and email.
func newAdmin(t *testing.T, is *issuer) (tokens, string, string) {
	t.Helper()
	email := uniqueEmail()
	if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", email, "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create --role admin: %v\n%s", err, out)
	}
	tk := login(t, is, email, strongPassword, "")
	me := do(t, "GET", is.base+"/v1/me", nil, bearer(tk.Access)...)
	wantStatus(t, "GET /v1/me", me, http.StatusOK)
	return tk, me.json(t)["id"].(string), email
}

func TestKeyLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		// Rotation off: every change here is the test's.
		is := startIssuer(t, dbURL, "--key-rotation-interval", "0", "--webhook-allow-cidr", "127.0.0.0/8")
		admin, adminID, adminEmail := newAdmin(t, is)
		first := kidOf(t, admin.Access)
		// Key changes are webhook events: a subscribed endpoint gets a
		// delivery of each (nothing listens there; they stay pending).
		hook := do(t, "POST", is.base+"/v1/admin/webhooks", map[string]any{
			"url": "http://127.0.0.1:9/keys", "events": []string{"signing_key.rotated", "signing_key.revoked"},
		}, bearer(admin.Access)...)
		wantStatus(t, "POST /v1/admin/webhooks", hook, http.StatusCreated)
		hookID := hook.json(t)["id"].(string)
		if got := keyStates(adminKeys(t, is, admin.Access)); len(got) != 1 || got[first] != "active" {
			t.Fatalf("GET /v1/admin/keys at start = %v, want {%s: active}", got, first)
		}

		// Rotate through the admin API: published at once, signing later.
		r := do(t, "POST", is.base+"/v1/admin/keys/rotate", nil, bearer(admin.Access)...)
		wantStatus(t, "POST /v1/admin/keys/rotate", r, http.StatusCreated)
		var next keyObject
		if err := json.Unmarshal(r.body, &next); err != nil || next.State != "next" || next.ActivatesAt == nil {
			t.Fatalf("POST /v1/admin/keys/rotate = %s (%v), want a next key with activates_at", r.body, err)
		}
		if got := keyStates(adminKeys(t, is, admin.Access)); got[first] != "active" || got[next.KID] != "next" {
			t.Errorf("GET /v1/admin/keys after rotate = %v, want %s active and %s next", got, first, next.KID)
		}
		if got := keyStates(cliKeys(t, is)); got[first] != "active" || got[next.KID] != "next" {
			t.Errorf("keys list after rotate = %v, want %s active and %s next", got, first, next.KID)
		}
		if got := kids(t, is); !slices.Contains(got, next.KID) || !slices.Contains(got, first) {
			t.Errorf("JWKS after rotate = %v, want %s and %s", got, first, next.KID)
		}

		// Emergency: revoke the active key through the admin API. The
		// published next key signs at once; the revoked kid leaves the key
		// set and enters the revocation feed at once; its tokens are
		// refused by the issuer itself.
		r = do(t, "POST", is.base+"/v1/admin/keys/"+first+"/revoke", nil, bearer(admin.Access)...)
		wantStatus(t, "POST /v1/admin/keys/{active}/revoke", r, http.StatusOK)
		var revoked keyObject
		if err := json.Unmarshal(r.body, &revoked); err != nil || revoked.State != "revoked" || revoked.RevokedAt == nil {
			t.Fatalf("revoke = %s (%v), want state revoked with revoked_at", r.body, err)
		}
		if got := kids(t, is); slices.Contains(got, first) || !slices.Contains(got, next.KID) {
			t.Errorf("JWKS right after revoke = %v, want %s and not %s", got, next.KID, first)
		}
		wantProblem(t, "GET /v1/me with a token of the revoked key", do(t, "GET", is.base+"/v1/me", nil, bearer(admin.Access)...),
			http.StatusUnauthorized, "invalid_token")
		feed := do(t, "GET", is.base+"/v1/revocations", nil)
		wantStatus(t, "GET /v1/revocations", feed, http.StatusOK)
		if !strings.Contains(string(feed.body), `"`+first+`"`) {
			t.Errorf("GET /v1/revocations = %s, want the revoked kid %s", feed.body, first)
		}
		admin = login(t, is, adminEmail, strongPassword, "")
		if got := kidOf(t, admin.Access); got != next.KID {
			t.Errorf("kid of a token minted after revoke = %s, want the next key %s", got, next.KID)
		}
		if got := keyStates(adminKeys(t, is, admin.Access)); got[first] != "revoked" || got[next.KID] != "active" {
			t.Errorf("GET /v1/admin/keys after revoke = %v, want %s revoked and %s active", got, first, next.KID)
		}
		// Idempotent, and unknown kids are 404.
		r = do(t, "POST", is.base+"/v1/admin/keys/"+first+"/revoke", nil, bearer(admin.Access)...)
		wantStatus(t, "revoke a revoked key", r, http.StatusOK)
		wantProblem(t, "revoke an unknown kid", do(t, "POST", is.base+"/v1/admin/keys/no-such-kid/revoke", nil, bearer(admin.Access)...),
			http.StatusNotFound, "not_found")

		// The CLI revokes the key signing now with none published: a fresh
		// key signs, and the running issuer sees it within its reload
		// interval.
		if out, err := is.cli(t, "", "keys", "revoke", "--", next.KID); err != nil {
			t.Fatalf("keys revoke: %v\n%s", err, out)
		}
		waitFor(t, "the revoked key leaves the JWK set", func() bool { return !slices.Contains(kids(t, is), next.KID) })
		fresh := login(t, is, adminEmail, strongPassword, "")
		third := kidOf(t, fresh.Access)
		if third == first || third == next.KID {
			t.Errorf("kid after the CLI revoked the active key = %s, want a fresh key", third)
		}
		if got := keyStates(cliKeys(t, is)); got[next.KID] != "revoked" || got[third] != "active" {
			t.Errorf("keys list after keys revoke = %v, want %s revoked and %s active", got, next.KID, third)
		}
		wantStatus(t, "GET /v1/me with the fresh key's token", do(t, "GET", is.base+"/v1/me", nil, bearer(fresh.Access)...), http.StatusOK)

		// Audited with the actor, as catalogue types (webhook events).
		st := openStore(t, dbURL)
		evs, err := st.ListAudit(context.Background(), store.AuditFilter{Type: "signing_key.revoked", Limit: 10})
		if err != nil || len(evs) != 2 {
			t.Fatalf("signing_key.revoked events = %d (%v), want 2", len(evs), err)
		}
		vias := map[string]string{}
		for _, e := range evs {
			var data struct {
				KID string `json:"kid"`
				Via string `json:"via"`
			}
			_ = json.Unmarshal(e.Data, &data)
			vias[data.KID] = data.Via
			if data.KID == first && e.ActorID != adminID {
				t.Errorf("signing_key.revoked of %s actor = %q, want the admin %s", first, e.ActorID, adminID)
			}
		}
		if vias[first] != "api" || vias[next.KID] != "cli" {
			t.Errorf("signing_key.revoked via = %v, want %s api and %s cli", vias, first, next.KID)
		}
		r = do(t, "GET", is.base+"/v1/admin/webhooks/"+hookID+"/deliveries", nil, bearer(fresh.Access)...)
		wantStatus(t, "GET deliveries", r, http.StatusOK)
		var deliveries struct {
			Items []struct {
				EventType string `json:"event_type"`
			} `json:"items"`
		}
		if err := json.Unmarshal(r.body, &deliveries); err != nil {
			t.Fatal(err)
		}
		byType := map[string]int{}
		for _, d := range deliveries.Items {
			byType[d.EventType]++
		}
		if byType["signing_key.revoked"] != 2 || byType["signing_key.rotated"] != 1 {
			t.Errorf("webhook deliveries by type = %v, want 2 signing_key.revoked and 1 signing_key.rotated", byType)
		}
	})
}

// TestKeyScheduleTwoIssuers runs two issuers over one PostgreSQL with a
// rotation every 4 s: they agree on the signing key at every moment, one
// key is created per interval between them, and each verifies the other's
// tokens.
func TestKeyScheduleTwoIssuers(t *testing.T) {
	t.Parallel()
	dbURL := backends()[1].url(t)
	kek := kekFile(t)
	schedule := []string{"--jwks-max-age", "1s", "--activate-in", "2s", "--key-rotation-interval", "4s"}
	a := startIssuerWithKEK(t, dbURL, kek, schedule...)
	b := startIssuerWithKEK(t, dbURL, kek, schedule...)
	email := uniqueEmail()
	register(t, a, email)

	seenA, seenB := map[string]bool{}, map[string]bool{}
	deadline := time.Now().Add(13 * time.Second)
	for time.Now().Before(deadline) {
		ta := login(t, a, email, strongPassword, "")
		tb := login(t, b, email, strongPassword, "")
		seenA[kidOf(t, ta.Access)], seenB[kidOf(t, tb.Access)] = true, true
		wantStatus(t, "b verifies a's token", do(t, "GET", b.base+"/v1/me", nil, bearer(ta.Access)...), http.StatusOK)
		wantStatus(t, "a verifies b's token", do(t, "GET", a.base+"/v1/me", nil, bearer(tb.Access)...), http.StatusOK)
		time.Sleep(200 * time.Millisecond)
	}
	if len(seenA) < 3 {
		t.Errorf("issuer a signed with %d keys over 13 s of 4 s rotations, want at least 3", len(seenA))
	}
	for kid := range seenB {
		if !seenA[kid] {
			t.Errorf("issuer b signed with %s, which issuer a never did: a = %v, b = %v", kid, seenA, seenB)
		}
	}

	// One key per interval: unrevoked keys activate 4 s apart, never two
	// in one interval.
	st := openStore(t, dbURL)
	ks, err := st.SigningKeys(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ks, func(x, y store.SigningKey) int { return x.ActivatesAt.Compare(y.ActivatesAt) })
	for i := 1; i < len(ks); i++ {
		if gap := ks[i].ActivatesAt.Sub(ks[i-1].ActivatesAt); gap < 4*time.Second {
			t.Errorf("keys %s and %s activate %s apart, want at least the 4s interval (one key per interval)", ks[i-1].KID, ks[i].KID, gap)
		}
	}
	next := 0
	for _, k := range ks {
		if k.ActivatesAt.After(time.Now()) {
			next++
		}
	}
	if next != 1 {
		t.Errorf("next keys published = %d, want 1", next)
	}
}

// TestKeyScheduleRefusesUnsafeSettings: a key that could sign before every
// verifier's cached key set holds it is refused at start.
func TestKeyScheduleRefusesUnsafeSettings(t *testing.T) {
	kek := kekFile(t)
	for _, args := range [][]string{
		{"--jwks-max-age", "5m", "--activate-in", "1m"},
		{"--activate-in", "10m", "--key-rotation-interval", "10m"},
	} {
		out := serveRefused(t, append([]string{"--kek-file", kek, "--database-url", "sqlite:" + filepath.Join(t.TempDir(), "db")}, args...)...)
		if !strings.Contains(out, args[len(args)-2]) {
			t.Errorf("issuer serve %v said\n%s\nwant refused at start naming %s", args, out, args[len(args)-2])
		}
	}
}

// TestSigningKeyNoReplicaOpens: issuer keys rotate, and every command that
// seals, refuses a --kek-file that does not open the key signing now (a
// rotation scheduled a key no replica could open, and every login was 500
// once it signed), and a replica that
// cannot open the key signing now (another one sealed it under a
// key-encryption key this one does not hold) answers /health 503, so that
// a load balancer sends the logins elsewhere.
func TestSigningKeyNoReplicaOpens(t *testing.T) {
	dbURL := testdb.SQLite(t)
	is := startIssuer(t, dbURL, "--key-rotation-interval", "0")
	wantStatus(t, "health", do(t, "GET", is.base+"/health", nil), http.StatusOK)
	oldLine, err := os.ReadFile(is.kek)
	if err != nil {
		t.Fatal(err)
	}
	// Nor does any command that seals what it writes under the file's
	// key: a webhook secret, a mail's link token.
	wrong := &issuer{dbURL: dbURL, kek: kekFile(t)}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"keys", "rotate", "--activate-in", "1s"}},
		{"", []string{"webhooks", "create", "--url", "https://hooks.example/x", "--event", "*"}},
		{strongPassword + "\n", []string{"users", "create", "--email", uniqueEmail(), "--password-stdin"}},
	} {
		if out, err := wrong.cli(t, c.stdin, c.args...); err == nil || !strings.Contains(out, "--kek-file") {
			t.Fatalf("issuer %s with a key-encryption key that opens nothing = %v\n%s\nwant refused, naming --kek-file", strings.Join(c.args, " "), err, out)
		}
	}
	if out, err := wrong.cli(t, "", "keys", "list"); err != nil {
		t.Fatalf("keys list, which seals nothing, with that key-encryption key = %v\n%s", err, out)
	}
	// Revoking the key signing now, with no next key, makes a successor:
	// not under keys no replica holds.
	email := uniqueEmail()
	register(t, is, email)
	kid := kidOf(t, login(t, is, email, strongPassword, "").Access)
	if out, err := wrong.cli(t, "", "keys", "revoke", "--", kid); err == nil || !strings.Contains(out, "--kek-file") {
		t.Fatalf("keys revoke of the key signing now with a key-encryption key that opens nothing = %v\n%s\nwant refused, naming --kek-file", err, out)
	}
	wantStatus(t, "login after the refused revoke", postJSON(t, is.base+"/v1/login", loginBody(email, strongPassword)), http.StatusOK)
	// A new key-encryption key first, the old one after it: the rotation
	// is allowed and seals the next key under the new one, which the
	// running replica, on the old file alone, does not hold.
	newLine, err := os.ReadFile(wrong.kek)
	if err != nil {
		t.Fatal(err)
	}
	ring := &issuer{dbURL: dbURL, kek: filepath.Join(t.TempDir(), "kek")}
	if err := os.WriteFile(ring.kek, []byte(strings.TrimSpace(string(newLine))+"\n"+strings.TrimSpace(string(oldLine))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ring.cli(t, "", "keys", "rotate", "--activate-in", "1s"); err != nil {
		t.Fatalf("keys rotate with the new key first, the old after = %v\n%s", err, out)
	}
	// Polled until the next key signs (1 s) and the replica has read it
	// (--key-reload-interval 1s); the deadline is a hang guard.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := do(t, "GET", is.base+"/health", nil)
		if r.status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health of a replica that cannot open the key signing now = %d %s after 30 s, want 503", r.status, r.body)
		}
	}
	if _, ok := is.logs.waitFor(time.Now().Add(10*time.Second), func(l string) bool { return strings.Contains(l, "cannot sign tokens") }); !ok {
		t.Errorf("the replica's log does not say why it is unhealthy:\n%s", is.logs.String())
	}
}

// TestKeyReseal rotates the key-encryption key: a two-line file (new key
// first) opens what the old key sealed, keys reseal re-seals everything
// under the new one, and then the old line can go.
func TestKeyReseal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		kek := kekFile(t)
		oldLine, err := os.ReadFile(kek)
		if err != nil {
			t.Fatal(err)
		}
		is := startIssuerWithKEK(t, dbURL, kek, "--key-rotation-interval", "0")
		email := uniqueEmail()
		register(t, is, email)
		before := login(t, is, email, strongPassword, "")
		is.stop(t)

		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			t.Fatal(err)
		}
		newLine := base64.StdEncoding.EncodeToString(k)
		// The new key alone does not open the signing key: the issuer
		// refuses to start, naming the flag, instead of serving every
		// login a 500.
		if err := os.WriteFile(kek, []byte(newLine+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := serveRefused(t, "--database-url", dbURL, "--kek-file", kek, "--key-rotation-interval", "0"); !strings.Contains(out, "--kek-file") || strings.Contains(out, newLine) {
			t.Errorf("issuer serve with a key-encryption key that opens nothing said\n%s\nwant it refused naming --kek-file, without the key", out)
		}
		if err := os.WriteFile(kek, []byte(newLine+"\n"+strings.TrimSpace(string(oldLine))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		is = startIssuerWithKEK(t, dbURL, kek, "--key-rotation-interval", "0")
		during := login(t, is, email, strongPassword, "")
		if kidOf(t, during.Access) != kidOf(t, before.Access) {
			t.Errorf("kid with the two-line file = %s, want the same key %s", kidOf(t, during.Access), kidOf(t, before.Access))
		}
		out, err := is.cli(t, "", "keys", "reseal")
		var resealed, current, changed, unreadable int
		if _, serr := fmt.Sscanf(out, "resealed %d, already under the newest key %d, changed meanwhile %d, unreadable %d", &resealed, &current, &changed, &unreadable); err != nil || serr != nil || resealed < 1 || unreadable != 0 {
			t.Fatalf("keys reseal = %v\n%s\nwant the signing key (and any queued mail) resealed, nothing unreadable", err, out)
		}
		if out, err := is.cli(t, "", "keys", "reseal"); err != nil || !strings.Contains(out, "resealed 0,") {
			t.Errorf("keys reseal again = %v\n%s\nwant nothing left to reseal", err, out)
		}
		is.stop(t)

		if err := os.WriteFile(kek, []byte(newLine+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		is = startIssuerWithKEK(t, dbURL, kek, "--key-rotation-interval", "0")
		after := login(t, is, email, strongPassword, "")
		if kidOf(t, after.Access) != kidOf(t, before.Access) {
			t.Errorf("kid with only the new line = %s, want the same key %s", kidOf(t, after.Access), kidOf(t, before.Access))
		}
		wantStatus(t, "GET /v1/me with a token from before the KEK change", do(t, "GET", is.base+"/v1/me", nil, bearer(before.Access)...), http.StatusOK)
	})
}

// TestReadmeRotatingKeys runs the README's key-rotation runbook verbatim
// against the real binary.
func TestReadmeRotatingKeys(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "grep", "head", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: README key rotation example not run", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := shBlock(t, string(raw), "### Rotating signing keys")
	if !strings.Contains(script, "keys reseal") || !strings.HasSuffix(strings.TrimSpace(script), "kill %1") {
		t.Fatalf("the example changed shape; update this test:\n%s", script)
	}
	addr := mailtest.FreeAddr(t)
	script = strings.ReplaceAll(script, "localhost:8080", addr)
	script = strings.ReplaceAll(script, "./bin/issuer", filepath.Join(binDir, "issuer"))

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// The embedded default: the key-encryption key is ./data/kek.
	cmd.Env = append(os.Environ(), "ISSUER_LISTEN="+addr, "ISSUER_ADMIN_LISTEN=127.0.0.1:0",
		"ISSUER_DATABASE_URL=sqlite:"+dir+"/issuer.db")
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "issuer.log"))
		t.Fatalf("example failed: %v\n%s\nissuer log:\n%s", err, out, log)
	}
	text := string(out)
	for _, want := range []string{"next", "new key ", "revoked key ", `"keys":[{"kid":"`, `"state":"revoked"`, "resealed 0, already under the newest key 3,"} {
		if !strings.Contains(text, want) {
			t.Errorf("example's output lacks %q:\n%s", want, text)
		}
	}
	var resealed int
	if i := strings.Index(text, "resealed "); i < 0 {
		t.Errorf("example's output has no reseal report:\n%s", text)
	} else if _, err := fmt.Sscanf(text[i:], "resealed %d,", &resealed); err != nil || resealed != 3 {
		t.Errorf("first keys reseal resealed %d (%v), want the 3 signing keys:\n%s", resealed, err, text)
	}
	kek, err := os.ReadFile(filepath.Join(dir, "data", "kek"))
	if err != nil || strings.Count(strings.TrimSpace(string(kek)), "\n") != 0 {
		t.Errorf("data/kek after the example = %d lines (%v), want 1", strings.Count(string(kek), "\n"), err)
	}
}
