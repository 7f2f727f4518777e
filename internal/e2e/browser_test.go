package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// chromium finds the browser: Debian's chromium package. Without it the test
// is skipped on a laptop and fails in CI, which installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testdb.CIRequired() {
		t.Fatal("CI=true but no chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("SKIPPED: no chromium on PATH; the browser test needs Debian's chromium package (apt-get install chromium)")
	return ""
}

// freePort reserves a loopback port for a server that must know its own
// origin before it starts.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The browser demo, driven in headless Chromium: the page is served through
// the verifier (so "who am I" goes through it), the tokens arrive as
// HttpOnly cookies, and a cross-origin form post is refused.
func TestBrowserDemo(t *testing.T) {
	bin := chromium(t)
	dbURL := testdb.SQLite(t)
	port := freePort(t)
	origin := fmt.Sprintf("http://localhost:%d", port)
	is := startIssuer(t, dbURL, "--demo", "--browser-origins", origin)
	v := startVerifier(t, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--upstream", is.base,
		"--jwks-url", is.base+"/.well-known/jwks.json", "--browser-origins", origin,
		"--public-path", "/demo/*", "--public-path", "/v1/login", "--public-path", "/v1/register",
		"--public-path", "/v1/refresh", "--public-path", "/v1/logout", "--issuer-path", "/v1/*")
	v.waitReady(t)
	email := uniqueEmail()
	register(t, is, email)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The first action starts the browser; it must not run under a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/demo/")); err != nil {
		t.Fatalf("open the demo page: %v", err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, done := context.WithTimeout(ctx, 30*time.Second)
		defer done()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return s
	}
	waitText := func(id, prefix string) {
		t.Helper()
		step("wait for #"+id+" to start with "+prefix, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](fmt.Sprintf("document.getElementById(%q).textContent.startsWith(%q)", id, prefix))(ctx, tg)
			return chromedp.Void{}, err
		})
	}
	cookies := func() map[string]*network.Cookie {
		t.Helper()
		res, err := chromedp.CallBrowser(ctx, storage.GetCookies, storage.GetCookiesParams{})
		if err != nil {
			t.Fatalf("read the browser's cookies: %v", err)
		}
		out := map[string]*network.Cookie{}
		for _, c := range res.Cookies {
			out[c.Name] = c
		}
		return out
	}

	step("log in", chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), strongPassword),
		chromedp.Click(chromedp.ID("login-button")))
	waitText("status", "logged in")
	jar := cookies()
	for _, name := range []string{"__Host-access_token", "__Host-refresh_token", "__Host-csrf_token"} {
		c := jar[name]
		if c == nil {
			t.Fatalf("the browser holds no %s cookie; it has %v", name, jar)
		}
		if !c.HTTPOnly || !c.Secure || c.SameSite != network.CookieSameSiteLax || c.Path != "/" {
			t.Errorf("cookie %s: HttpOnly %v, Secure %v, SameSite %q, Path %q; want HttpOnly, Secure, Lax, /", name, c.HTTPOnly, c.Secure, c.SameSite, c.Path)
		}
	}
	if got := text("cookies"); got != "(none)" {
		t.Errorf("document.cookie = %q; the page's scripts must see no cookie", got)
	}

	step("who am I", chromedp.Click(chromedp.ID("whoami-button")))
	waitText("whoami", "{")
	if got := text("whoami"); !strings.Contains(got, email) {
		t.Errorf("who am I = %q, want the user's email", got)
	}

	// An attacker's page posts a form to the logout-all endpoint. From a
	// same-site origin the cookies go along but the Origin is wrong (403
	// csrf_failed); from another site SameSite=Lax keeps them home (401).
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="POST" action="%s/v1/logout/all"></form><script>document.getElementById("f").submit()</script>`, origin)
	}))
	defer attacker.Close()
	attackerPort := attacker.Listener.Addr().(*net.TCPAddr).Port
	for _, tt := range []struct{ from, wantCode string }{
		{fmt.Sprintf("http://localhost:%d/", attackerPort), "csrf_failed"},
		{fmt.Sprintf("http://127.0.0.1:%d/", attackerPort), "invalid_token"},
	} {
		step("open the attacker's page "+tt.from, chromedp.Navigate(tt.from))
		step("wait for the forged post to land", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			for ctx.Err() == nil {
				loc, err := chromedp.Location()(ctx, tg)
				if err == nil && strings.HasPrefix(loc, origin+"/v1/logout/all") {
					return chromedp.Void{}, nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return chromedp.Void{}, ctx.Err()
		})
		body, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
		if err != nil || !strings.Contains(body, tt.wantCode) {
			t.Errorf("forged post from %s answered %q (%v), want %s", tt.from, body, err, tt.wantCode)
		}
	}
	// Nothing was revoked.
	st := openStore(t, dbURL)
	u, err := st.UserByEmail(context.Background(), strings.ToLower(email))
	if err != nil {
		t.Fatal(err)
	}
	if ss, err := st.ActiveSessions(context.Background(), u.ID, time.Now(), 100); err != nil || len(ss) != 1 {
		t.Errorf("active sessions after the forged posts = %d (%v), want 1", len(ss), err)
	}
	if evs, _ := st.ListAudit(context.Background(), store.AuditFilter{UserID: u.ID, Type: "user.logged_out_all"}); len(evs) != 0 {
		t.Errorf("a forged post logged the user out everywhere: %v", evs)
	}

	// Back on the demo page, log out: the cookies are gone and "who am I" fails.
	step("back to the demo", chromedp.Navigate(origin+"/demo/"), chromedp.Click(chromedp.ID("logout-button")))
	waitText("status", "logged out")
	if jar := cookies(); len(jar) != 0 {
		t.Errorf("cookies after logout: %v", jar)
	}
	step("who am I after logout", chromedp.Click(chromedp.ID("whoami-button")))
	waitText("whoami", "401")
}
