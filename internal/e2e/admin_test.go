package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// adminFixture is an issuer with an admin and a victim account.
type adminFixture struct {
	is          *issuer
	admin       tokens
	adminID     string
	victimEmail string
	victimID    string
}

// TestAdminAPI drives the admin API and its command-line equivalents
// against the real issuer on both databases.
func TestAdminAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		f := &adminFixture{is: is, victimEmail: uniqueEmail()}
		adminEmail := uniqueEmail()
		if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", adminEmail, "--role", "admin", "--password-stdin"); err != nil {
			t.Fatalf("users create --role admin: %v\n%s", err, out)
		}
		f.admin = login(t, is, adminEmail, strongPassword, "admin-laptop")
		f.adminID = adminGet(t, f, f.admin.Access, "/v1/me")["id"].(string)
		f.victimID = register(t, is, f.victimEmail)["id"].(string)
		victim := login(t, is, f.victimEmail, strongPassword, "laptop")

		adminForbidden(t, f, victim.Access)
		adminHostile(t, f)
		adminReads(t, f)
		adminDisable(t, f, victim)
		adminRereadsTheAdmin(t, f)
		adminAudit(t, f)
		adminCLI(t, f)
	})
}

// adminRequests is one request to every admin endpoint, some of them
// invalid: a non-admin must get 403 before anything is validated.
func adminRequests(f *adminFixture) []struct{ name, method, path, body string } {
	victim := "/v1/admin/users/" + f.victimID
	return []struct{ name, method, path, body string }{
		{"ListUsers", "GET", "/v1/admin/users", ""},
		{"ListUsersBadLimit", "GET", "/v1/admin/users?limit=bogus", ""},
		{"GetUser", "GET", victim, ""},
		{"GetUnknownUser", "GET", "/v1/admin/users/no-such-user", ""},
		{"PatchUser", "PATCH", victim, `{"status": "disabled"}`},
		{"PatchUserMalformed", "PATCH", victim, `not json`},
		{"PatchSelfToAdmin", "PATCH", victim, `{"role": "admin"}`},
		{"ListSessions", "GET", victim + "/sessions", ""},
		{"RevokeSessions", "DELETE", victim + "/sessions", ""},
		{"Audit", "GET", "/v1/admin/audit", ""},
		{"AuditBadSince", "GET", "/v1/admin/audit?since=yesterday", ""},
	}
}

func adminSend(t *testing.T, f *adminFixture, method, path, body string, headers ...string) response {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	return do(t, method, f.is.base+path, b, headers...)
}

func adminForbidden(t *testing.T, f *adminFixture, userAccess string) {
	for _, rq := range adminRequests(f) {
		t.Run("Forbidden/"+rq.name, func(t *testing.T) {
			r := adminSend(t, f, rq.method, rq.path, rq.body)
			wantProblem(t, rq.name+" without a token", r, http.StatusUnauthorized, "invalid_token")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s without a token: WWW-Authenticate = %q, want Bearer", rq.name, r.header.Get("WWW-Authenticate"))
			}
			wantProblem(t, rq.name+" with a forged token", adminSend(t, f, rq.method, rq.path, rq.body, bearer("e30.e30.AAAA")...),
				http.StatusUnauthorized, "invalid_token")
			wantProblem(t, rq.name+" as a user", adminSend(t, f, rq.method, rq.path, rq.body, bearer(userAccess)...),
				http.StatusForbidden, "forbidden")
		})
	}
	// None of it changed anything.
	u := adminGet(t, f, f.admin.Access, "/v1/admin/users/"+f.victimID)
	if u["status"] != "enabled" || u["role"] != "user" {
		t.Errorf("victim after the refused requests = %v, want enabled user", u)
	}
	if items, _ := adminList(t, f, "/v1/admin/users/"+f.victimID+"/sessions"); len(items) != 1 {
		t.Errorf("victim sessions after the refused requests = %d, want 1", len(items))
	}
}

// adminHostile sends ids and filters PostgreSQL cannot take (NUL, invalid
// UTF-8) as the admin: each is a 400, where they were once 500s, and the
// issuer is none the worse.
func adminHostile(t *testing.T, f *adminFixture) {
	victim := "/v1/admin/users/" + f.victimID
	for _, rq := range []struct{ name, method, path, body string }{
		{"NUL id", "GET", "/v1/admin/users/%00", ""},
		{"invalid UTF-8 id", "GET", "/v1/admin/users/%ff", ""},
		{"NUL id sessions", "GET", "/v1/admin/users/%00/sessions", ""},
		{"NUL id revoke", "DELETE", "/v1/admin/users/%00/sessions", ""},
		{"NUL id patch", "PATCH", "/v1/admin/users/%00", `{"role":"user"}`},
		{"NUL email filter", "GET", "/v1/admin/users?email=%00", ""},
		{"invalid UTF-8 email filter", "GET", "/v1/admin/users?email=%c3%28", ""},
		{"NUL user filter", "GET", "/v1/admin/audit?user_id=%00", ""},
		{"NUL in a patch", "PATCH", victim, `{"tenant_id":"t\u0000"}`},
	} {
		t.Run("Hostile/"+rq.name, func(t *testing.T) {
			wantProblem(t, rq.name, adminSend(t, f, rq.method, rq.path, rq.body, bearer(f.admin.Access)...),
				http.StatusBadRequest, "malformed_request")
		})
	}
	if u := adminGet(t, f, f.admin.Access, victim); u["tenant_id"] != nil {
		t.Errorf("victim after the hostile patch = %v, want no tenant", u)
	}
}

// adminGet GETs path with tok and decodes the object answered.
func adminGet(t *testing.T, f *adminFixture, tok, path string) map[string]any {
	t.Helper()
	r := adminSend(t, f, "GET", path, "", bearer(tok)...)
	wantStatus(t, "GET "+path, r, http.StatusOK)
	return r.json(t)
}

// adminList GETs one page of an admin list as the admin.
func adminList(t *testing.T, f *adminFixture, path string) (items []map[string]any, next string) {
	t.Helper()
	r := adminSend(t, f, "GET", path, "", bearer(f.admin.Access)...)
	wantStatus(t, "GET "+path, r, http.StatusOK)
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("GET %s: Cache-Control = %q, want no-store", path, cc)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("GET %s: body %s: %v", path, r.body, err)
	}
	nc, ok := raw["next_cursor"]
	if _, hasItems := raw["items"]; !hasItems || !ok {
		t.Fatalf("GET %s: body %s, want items and next_cursor", path, r.body)
	}
	if err := json.Unmarshal(raw["items"], &items); err != nil || items == nil {
		t.Fatalf("GET %s: items %s, want an array", path, raw["items"])
	}
	if string(nc) != "null" {
		if err := json.Unmarshal(nc, &next); err != nil || next == "" {
			t.Fatalf("GET %s: next_cursor %s, want a string or null", path, nc)
		}
	}
	return items, next
}

// adminPages follows next_cursor from path with ?limit=limit and returns
// every item; each page must hold 1 to limit items.
func adminPages(t *testing.T, f *adminFixture, path string, limit int) []map[string]any {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	base := path + sep + "limit=" + strconv.Itoa(limit)
	var all []map[string]any
	for cursor, pages := "", 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("%s: pagination does not end", base)
		}
		p := base
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		items, next := adminList(t, f, p)
		if len(items) == 0 || len(items) > limit {
			t.Fatalf("GET %s = %d items, want 1 to %d", p, len(items), limit)
		}
		all = append(all, items...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func ids(items []map[string]any) []string {
	var out []string
	for _, it := range items {
		out = append(out, it["id"].(string))
	}
	return out
}

func adminReads(t *testing.T, f *adminFixture) {
	items, next := adminList(t, f, "/v1/admin/users?email="+url.QueryEscape(strings.ToUpper(f.victimEmail)))
	if len(items) != 1 || items[0]["id"] != f.victimID || next != "" {
		t.Errorf("users?email=victim = %v, next %q; want only the victim, no next page", items, next)
	}
	if _, ok := items[0]["password_hash"]; ok {
		t.Error("a listed user carries a password_hash member")
	}
	wantProblem(t, "unknown user", adminSend(t, f, "GET", "/v1/admin/users/no-such-user", "", bearer(f.admin.Access)...), http.StatusNotFound, "not_found")
	wantProblem(t, "sessions of an unknown user", adminSend(t, f, "GET", "/v1/admin/users/no-such-user/sessions", "", bearer(f.admin.Access)...), http.StatusNotFound, "not_found")

	for range 3 {
		register(t, f.is, uniqueEmail())
	}
	all, next := adminList(t, f, "/v1/admin/users?limit=500")
	if len(all) != 5 || next != "" {
		t.Fatalf("users?limit=500 = %d users, next %q; want the 5 of this test", len(all), next)
	}
	for _, limit := range []int{1, 2, 3} {
		if got := ids(adminPages(t, f, "/v1/admin/users", limit)); !slices.Equal(got, ids(all)) {
			t.Errorf("users pages of %d = %q, want %q", limit, got, ids(all))
		}
	}
	_, auditCursor := adminList(t, f, "/v1/admin/audit?limit=1")
	for _, q := range []string{
		"/v1/admin/users?limit=0", "/v1/admin/users?limit=501", "/v1/admin/users?limit=x",
		"/v1/admin/users?cursor=garbage", "/v1/admin/users?cursor=" + url.QueryEscape(auditCursor),
		"/v1/admin/audit?since=2025-01-01", "/v1/admin/audit?until=tomorrow", "/v1/admin/audit?limit=-1",
		"/v1/admin/users/" + f.victimID + "/sessions?cursor=e30",
	} {
		wantProblem(t, "GET "+q, adminSend(t, f, "GET", q, "", bearer(f.admin.Access)...), http.StatusBadRequest, "malformed_request")
	}
}

// adminPatch PATCHes the victim as the admin and checks the status.
func adminPatch(t *testing.T, f *adminFixture, body string, status int, headers ...string) response {
	t.Helper()
	r := adminSend(t, f, "PATCH", "/v1/admin/users/"+f.victimID, body, append(bearer(f.admin.Access), headers...)...)
	wantStatus(t, "PATCH "+body, r, status)
	return r
}

func adminDisable(t *testing.T, f *adminFixture, laptop tokens) {
	phone := login(t, f.is, f.victimEmail, strongPassword, "phone")
	if items, _ := adminList(t, f, "/v1/admin/users/"+f.victimID+"/sessions"); len(items) != 2 {
		t.Fatalf("victim sessions = %d, want 2", len(items))
	}

	u := adminPatch(t, f, `{"status": "disabled"}`, http.StatusOK, "X-Request-Id", "admin-disable-1").json(t)
	if u["status"] != "disabled" || u["id"] != f.victimID {
		t.Errorf("PATCH status disabled = %v, want the disabled victim", u)
	}
	for name, tk := range map[string]tokens{"laptop": laptop, "phone": phone} {
		wantProblem(t, "refresh of the "+name+" after disable", refresh(t, f.is, tk.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	}
	wantProblem(t, "login while disabled, right password", do(t, "POST", f.is.base+"/v1/login",
		map[string]string{"email": f.victimEmail, "password": strongPassword}), http.StatusForbidden, "account_disabled")
	wantProblem(t, "login while disabled, wrong password", do(t, "POST", f.is.base+"/v1/login",
		map[string]string{"email": f.victimEmail, "password": "not the password at all"}), http.StatusUnauthorized, "invalid_credentials")
	if items, _ := adminList(t, f, "/v1/admin/users/"+f.victimID+"/sessions"); len(items) != 0 {
		t.Errorf("victim sessions after disable = %d, want 0", len(items))
	}

	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"status": 1}`, http.StatusBadRequest, "malformed_request"},
		{`{"role": ["admin"]}`, http.StatusBadRequest, "malformed_request"},
		{`{"status": "enabled"} trailing`, http.StatusBadRequest, "malformed_request"},
		{`{"status": "locked"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{`{"role": "super admin"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{`{"tenant_id": "a b"}`, http.StatusUnprocessableEntity, "validation_failed"},
	} {
		wantProblem(t, "PATCH "+tc.body, adminPatch(t, f, tc.body, tc.status), tc.status, tc.code)
	}
	wantProblem(t, "PATCH as text/plain", adminSend(t, f, "PATCH", "/v1/admin/users/"+f.victimID, `{"status": "enabled"}`,
		append(bearer(f.admin.Access), "Content-Type", "text/plain")...), http.StatusUnsupportedMediaType, "unsupported_media_type")
	wantProblem(t, "PATCH unknown user", adminSend(t, f, "PATCH", "/v1/admin/users/no-such-user", `{"role": "x"}`, bearer(f.admin.Access)...),
		http.StatusNotFound, "not_found")

	adminPatch(t, f, `{"status": "enabled"}`, http.StatusOK)
	laptop = login(t, f.is, f.victimEmail, strongPassword, "laptop")

	u = adminPatch(t, f, `{"role": "auditor", "tenant_id": "acme"}`, http.StatusOK).json(t)
	if u["role"] != "auditor" || u["tenant_id"] != "acme" || u["status"] != "enabled" {
		t.Errorf("PATCH role and tenant = %v, want auditor of acme, enabled", u)
	}
	// Status and role at once: two entries in one transaction, one time.
	adminPatch(t, f, `{"status": "disabled", "role": "user", "tenant_id": ""}`, http.StatusOK)
	wantProblem(t, "refresh after the second disable", refresh(t, f.is, laptop.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	adminPatch(t, f, `{"status": "enabled"}`, http.StatusOK)
	if u := adminGet(t, f, f.admin.Access, "/v1/admin/users/"+f.victimID); u["role"] != "user" || u["status"] != "enabled" || u["tenant_id"] != nil {
		t.Errorf("victim = %v, want an enabled user without tenant", u)
	}

	phone = login(t, f.is, f.victimEmail, strongPassword, "phone")
	r := adminSend(t, f, "DELETE", "/v1/admin/users/"+f.victimID+"/sessions", "", bearer(f.admin.Access)...)
	wantStatus(t, "DELETE sessions", r, http.StatusNoContent)
	wantProblem(t, "refresh after DELETE sessions", refresh(t, f.is, phone.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
	// Revoking sessions does not disable: the user logs in again.
	login(t, f.is, f.victimEmail, strongPassword, "phone")
}

// adminRereadsTheAdmin: an admin demoted after login keeps an access
// token claiming admin until it expires; neither reads nor writes trust it.
func adminRereadsTheAdmin(t *testing.T, f *adminFixture) {
	email := uniqueEmail()
	if out, err := f.is.cli(t, strongPassword+"\n", "users", "create", "--email", email, "--role", "admin", "--password-stdin"); err != nil {
		t.Fatalf("users create: %v\n%s", err, out)
	}
	stale := login(t, f.is, email, strongPassword, "")
	if out, err := f.is.cli(t, "", "users", "set-role", email, "user"); err != nil {
		t.Fatalf("users set-role: %v\n%s", err, out)
	}
	for _, path := range []string{
		"/v1/admin/users", "/v1/admin/users/" + f.victimID, "/v1/admin/users/" + f.victimID + "/sessions", "/v1/admin/audit",
	} {
		wantProblem(t, "GET "+path+" by a demoted admin", adminSend(t, f, "GET", path, "", bearer(stale.Access)...),
			http.StatusForbidden, "forbidden")
	}
	wantProblem(t, "PATCH by a demoted admin", adminSend(t, f, "PATCH", "/v1/admin/users/"+f.victimID, `{"status": "disabled"}`, bearer(stale.Access)...),
		http.StatusForbidden, "forbidden")
	wantProblem(t, "DELETE sessions by a demoted admin", adminSend(t, f, "DELETE", "/v1/admin/users/"+f.victimID+"/sessions", "", bearer(stale.Access)...),
		http.StatusForbidden, "forbidden")
	if u := adminGet(t, f, f.admin.Access, "/v1/admin/users/"+f.victimID); u["status"] != "enabled" {
		t.Errorf("victim after the demoted admin's PATCH = %v, want enabled", u)
	}
}

// adminAudit checks the victim's trail: exactly what the steps above
// caused, newest first, the same whatever the page size.
func adminAudit(t *testing.T, f *adminFixture) {
	path := "/v1/admin/audit?user_id=" + f.victimID
	all, next := adminList(t, f, path+"&limit=500")
	if next != "" {
		t.Fatalf("audit of the victim has a next page at limit 500")
	}
	var types []string
	for _, e := range all {
		types = append(types, e["type"].(string))
	}
	want := []string{ // oldest first
		"user.registered",
		"user.logged_in", "user.logged_in", // laptop, phone
		"user.disabled",
		"login.failed", "login.failed", // right and wrong password while disabled
		"user.enabled",
		"user.logged_in",
		"user.updated",
		"user.disabled", "user.updated", // one PATCH: ids order them
		"user.enabled",
		"user.logged_in",
		"session.revoked", // DELETE sessions
		"user.logged_in",
	}
	slices.Reverse(want)
	if !slices.Equal(types, want) {
		t.Fatalf("audit of the victim, newest first =\n\t%q\nwant\n\t%q", types, want)
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if ta, tb := a["occurred_at"].(string), b["occurred_at"].(string); adminTime(t, ta).Before(adminTime(t, tb)) ||
			ta == tb && a["id"].(string) < b["id"].(string) {
			t.Errorf("audit order: %v before %v, want newest first, then id descending", a, b)
		}
	}
	for _, limit := range []int{1, 2, 4} {
		if got := ids(adminPages(t, f, path, limit)); !slices.Equal(got, ids(all)) {
			t.Errorf("audit pages of %d = %q, want %q", limit, got, ids(all))
		}
	}

	admin := map[string]bool{"user.disabled": true, "user.enabled": true, "user.updated": true, "session.revoked": true}
	for _, e := range all {
		d, _ := e["data"].(map[string]any)
		if !admin[e["type"].(string)] {
			if _, ok := e["actor_id"]; ok {
				t.Errorf("audit %v: actor_id on a user's own action", e)
			}
			continue
		}
		if e["actor_id"] != f.adminID || d["via"] != "api" || e["ip"] == nil || e["request_id"] == nil || e["user_id"] != f.victimID {
			t.Errorf("audit %v: want actor %s via api with the admin's ip and request id", e, f.adminID)
		}
	}
	first := all[len(all)-4] // the first user.disabled
	if d := first["data"].(map[string]any); first["type"] != "user.disabled" || first["request_id"] != "admin-disable-1" || d["revoked_sessions"] != float64(2) {
		t.Errorf("first user.disabled = %v, want request admin-disable-1 revoking 2 sessions", first)
	}
	if d := all[1]["data"].(map[string]any); d["reason"] != "revoked_by_admin" || d["revoked_sessions"] != float64(1) {
		t.Errorf("session.revoked = %v, want revoked_by_admin of 1 session", all[1])
	}

	byType, _ := adminList(t, f, "/v1/admin/audit?type=user.disabled")
	if len(byType) != 2 || byType[0]["user_id"] != f.victimID || byType[1]["user_id"] != f.victimID {
		t.Errorf("audit?type=user.disabled = %v, want the victim's 2", byType)
	}
	// since is inclusive, until exclusive: split at the first role change.
	split := all[len(all)-9]
	at := url.QueryEscape(split["occurred_at"].(string))
	later, _ := adminList(t, f, path+"&since="+at)
	earlier, _ := adminList(t, f, path+"&until="+at)
	if !slices.Equal(ids(later), ids(all[:len(all)-8])) || !slices.Equal(ids(earlier), ids(all[len(all)-8:])) {
		t.Errorf("audit split at %s: since = %q, until = %q; want %q and %q", at, ids(later), ids(earlier), ids(all[:len(all)-8]), ids(all[len(all)-8:]))
	}
}

func adminTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("occurred_at %q: %v", s, err)
	}
	return v
}

// adminCLI: the command-line equivalents over the same database.
func adminCLI(t *testing.T, f *adminFixture) {
	cli := func(args ...string) string {
		t.Helper()
		out, err := f.is.cli(t, "", args...)
		if err != nil {
			t.Fatalf("issuer %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := cli("users", "list", "--email", f.victimEmail)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], f.victimID) ||
		!strings.Contains(lines[1], f.victimEmail) || !strings.Contains(lines[1], "enabled") {
		t.Errorf("users list --email = \n%s\nwant a header and the victim's row", out)
	}
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(cli("users", "list", "--json")), "\n") {
		var u map[string]any
		if err := json.Unmarshal([]byte(l), &u); err != nil {
			t.Fatalf("users list --json line %q: %v", l, err)
		}
		listed = append(listed, u["id"].(string))
	}
	apiUsers, _ := adminList(t, f, "/v1/admin/users?limit=500")
	if !slices.Equal(listed, ids(apiUsers)) {
		t.Errorf("users list --json = %q, want the API's %q", listed, ids(apiUsers))
	}

	cli("users", "disable", f.victimEmail)
	wantProblem(t, "login after users disable", do(t, "POST", f.is.base+"/v1/login",
		map[string]string{"email": f.victimEmail, "password": strongPassword}), http.StatusForbidden, "account_disabled")
	cli("users", "enable", f.victimID)
	login(t, f.is, f.victimEmail, strongPassword, "laptop")
	cli("users", "set-role", strings.ToUpper(f.victimEmail), "support")
	if u := adminGet(t, f, f.admin.Access, "/v1/admin/users/"+f.victimID); u["role"] != "support" {
		t.Errorf("role after users set-role = %v, want support", u["role"])
	}
	for _, args := range [][]string{
		{"users", "set-role", f.victimEmail, "bad role"},
		{"users", "disable", "nobody@example.com"},
		{"users", "enable"},
		{"audit", "list", "--since", "last tuesday"},
	} {
		if out, err := f.is.cli(t, "", args...); err == nil {
			t.Errorf("issuer %s succeeded, want an error\n%s", strings.Join(args, " "), out)
		}
	}

	out = cli("audit", "list", "--user", f.victimEmail, "--type", "user.disabled", "--since", "1h")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("audit list --type user.disabled = \n%s\nwant a header and 3 rows", out)
	}
	// Newest first: the CLI's (no actor), then the two by the admin.
	if strings.Contains(lines[1], f.adminID) || !strings.Contains(lines[1], `"via":"cli"`) ||
		!strings.Contains(lines[2], f.adminID) || !strings.Contains(lines[3], f.adminID) {
		t.Errorf("audit list rows =\n%s\nwant the CLI's entry first, then the admin's two", out)
	}
	out = cli("audit", "list", "--user", f.victimID, "--json", "--limit", "2")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var got []map[string]any
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit list --json line %q: %v", l, err)
		}
		got = append(got, e)
	}
	if len(got) != 2 || got[0]["type"] != "user.updated" || got[1]["type"] != "user.logged_in" {
		t.Fatalf("audit list --json --limit 2 = %v, want user.updated (set-role), user.logged_in", got)
	}
	if d := got[0]["data"].(map[string]any); got[0]["actor_id"] != nil || d["via"] != "cli" || got[0]["user_agent"] != "issuer-cli" {
		t.Errorf("audit entry of set-role = %v, want no actor, via cli, user agent issuer-cli", got[0])
	}
	apiAudit, _ := adminList(t, f, "/v1/admin/audit?user_id="+f.victimID+"&limit=2")
	if !slices.Equal(ids(got), ids(apiAudit)) {
		t.Errorf("audit list --json = %q, want the API's %q", ids(got), ids(apiAudit))
	}
}
