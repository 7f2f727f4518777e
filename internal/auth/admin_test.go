package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// admin registers an account with role admin and returns it as an actor.
func (f *fixture) admin(t *testing.T, email string) auth.Actor {
	t.Helper()
	u, err := f.svc.Register(context.Background(), auth.RegisterInput{Email: email, Password: pw, Role: auth.RoleAdmin}, auth.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return auth.Actor{UserID: u.ID, Role: u.Role}
}

// events returns the user's audit entries of the given types, newest first.
func (f *fixture) events(t *testing.T, userID string, types ...string) []store.AuditEvent {
	t.Helper()
	all, err := f.st.ListAudit(context.Background(), store.AuditFilter{UserID: userID})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEvent
	for _, e := range all {
		if slices.Contains(types, e.Type) {
			out = append(out, e)
		}
	}
	return out
}

func dataOf(t *testing.T, e store.AuditEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("audit %s data %q: %v", e.Type, e.Data, err)
	}
	return m
}

func ptr(s string) *string { return &s }

// adminCalls is every admin operation of the service, each run as actor on
// target.
func adminCalls(f *fixture, target string) map[string]func(ctx context.Context, a auth.Actor) error {
	return map[string]func(ctx context.Context, a auth.Actor) error{
		"AdminUsers": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminUsers(ctx, a, auth.UserQuery{})
			return err
		},
		"AdminUser": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminUser(ctx, a, target)
			return err
		},
		"AdminFindUser": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminFindUser(ctx, a, "target@example.com")
			return err
		},
		"AdminUpdateUser": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminUpdateUser(ctx, a, target, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, auth.Meta{})
			return err
		},
		"AdminUpdateUser(empty)": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminUpdateUser(ctx, a, target, auth.UserPatch{}, auth.Meta{})
			return err
		},
		"AdminSessions": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminSessions(ctx, a, target, auth.PageQuery{})
			return err
		},
		"AdminRevokeSessions": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminRevokeSessions(ctx, a, target, auth.Meta{})
			return err
		},
		"AdminAudit": func(ctx context.Context, a auth.Actor) error {
			_, err := f.svc.AdminAudit(ctx, a, auth.AuditQuery{})
			return err
		},
	}
}

func TestAdminForbidden(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	target := f.user(t, "target@example.com")
	f.login(t, "target@example.com", "d1")
	adm := f.admin(t, "admin@example.com")
	for name, call := range adminCalls(f, target.ID) {
		for _, tc := range []struct {
			name  string
			actor auth.Actor
		}{
			{"Zero", auth.Actor{}},
			{"UserRole", auth.Actor{UserID: target.ID, Role: auth.RoleUser}},
			{"AdminRoleNoAccount", auth.Actor{Role: auth.RoleAdmin}},
			{"RoleCase", auth.Actor{UserID: adm.UserID, Role: "Admin"}},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				wantCode(t, fmt.Sprintf("%s(%+v)", name, tc.actor), call(ctx, tc.actor), "forbidden")
			})
		}
	}
	// Nothing of the above changed the target or wrote an admin event.
	if u, _ := f.st.UserByID(ctx, target.ID); u.Status != auth.StatusEnabled {
		t.Errorf("target status = %q after forbidden calls, want enabled", u.Status)
	}
	if evs := f.events(t, target.ID, auth.EventUserDisabled, auth.EventSessionRevoked); len(evs) != 0 {
		t.Errorf("audit after forbidden calls = %d admin events, want none", len(evs))
	}
	for name, call := range adminCalls(f, target.ID) {
		if err := call(ctx, adm); err != nil {
			t.Errorf("%s(admin) = %v, want nil", name, err)
		}
	}
}

// TestAdminCallsRereadTheAdmin: the role in an access token is not enough;
// every read and write checks the acting admin in the database, so an admin
// demoted or disabled since the token was minted can neither read nor
// change accounts, sessions or the audit trail.
func TestAdminCallsRereadTheAdmin(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		ctx := context.Background()
		target := f.user(t, "target@example.com")
		f.login(t, "target@example.com", "d1")
		for _, tc := range []struct {
			name   string
			change auth.UserPatch
		}{
			{"Demoted", auth.UserPatch{Role: ptr(auth.RoleUser)}},
			{"Disabled", auth.UserPatch{Status: ptr(auth.StatusDisabled)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				adm := f.admin(t, "admin-"+tc.name+"@example.com")
				if _, err := f.svc.AdminUpdateUser(ctx, auth.Operator(), adm.UserID, tc.change, auth.Meta{}); err != nil {
					t.Fatal(err)
				}
				// adm still claims admin, as its unexpired access token would.
				_, err := f.svc.AdminUser(ctx, adm, target.ID)
				wantCode(t, "AdminUser by the stale admin", err, "forbidden")
				_, err = f.svc.AdminFindUser(ctx, adm, "target@example.com")
				wantCode(t, "AdminFindUser(email) by the stale admin", err, "forbidden")
				_, err = f.svc.AdminUsers(ctx, adm, auth.UserQuery{})
				wantCode(t, "AdminUsers by the stale admin", err, "forbidden")
				_, err = f.svc.AdminSessions(ctx, adm, target.ID, auth.PageQuery{})
				wantCode(t, "AdminSessions by the stale admin", err, "forbidden")
				_, err = f.svc.AdminAudit(ctx, adm, auth.AuditQuery{})
				wantCode(t, "AdminAudit by the stale admin", err, "forbidden")
				_, err = f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, auth.Meta{})
				wantCode(t, "AdminUpdateUser by the stale admin", err, "forbidden")
				_, err = f.svc.AdminRevokeSessions(ctx, adm, target.ID, auth.Meta{})
				wantCode(t, "AdminRevokeSessions by the stale admin", err, "forbidden")
				// Nor may it learn which ids exist: forbidden, not not_found,
				// for an account that is not there.
				_, err = f.svc.AdminUser(ctx, adm, "no-such-user")
				wantCode(t, "AdminUser(unknown) by the stale admin", err, "forbidden")
				_, err = f.svc.AdminSessions(ctx, adm, "no-such-user", auth.PageQuery{})
				wantCode(t, "AdminSessions(unknown) by the stale admin", err, "forbidden")
				_, err = f.svc.AdminUpdateUser(ctx, adm, "no-such-user", auth.UserPatch{Status: ptr(auth.StatusDisabled)}, auth.Meta{})
				wantCode(t, "AdminUpdateUser(unknown) by the stale admin", err, "forbidden")
				_, err = f.svc.AdminRevokeSessions(ctx, adm, "no-such-user", auth.Meta{})
				wantCode(t, "AdminRevokeSessions(unknown) by the stale admin", err, "forbidden")
				page, err := f.svc.AdminSessions(ctx, auth.Operator(), target.ID, auth.PageQuery{})
				if err != nil || len(page.Sessions) != 1 {
					t.Errorf("AdminSessions(target) = %d sessions, %v; want the 1 session untouched", len(page.Sessions), err)
				}
			})
		}
		_, err := f.svc.AdminUpdateUser(ctx, auth.Actor{UserID: "no-such-user", Role: auth.RoleAdmin}, target.ID,
			auth.UserPatch{Role: ptr("admin")}, auth.Meta{})
		wantCode(t, "AdminUpdateUser by a deleted admin", err, "forbidden")
		_, err = f.svc.AdminUser(ctx, auth.Actor{UserID: "no-such-user", Role: auth.RoleAdmin}, target.ID)
		wantCode(t, "AdminUser by a deleted admin", err, "forbidden")
		if u, _ := f.st.UserByID(ctx, target.ID); u.Status != auth.StatusEnabled || u.Role != auth.RoleUser {
			t.Errorf("target after refused writes = %s/%s, want enabled/user", u.Status, u.Role)
		}
	})
}

// An admin demoted after the check before the target's lock, while the
// write waits for it, is refused under the lock: the early check spares
// the target's not_found, it does not replace the decision in the lock.
func TestAdminWritesRecheckUnderTheLock(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		ctx := context.Background()
		target := f.user(t, "target@example.com")
		f.login(t, "target@example.com", "d1")
		adm := f.admin(t, "admin@example.com")
		demoted := false
		svc := f.over(meanwhile{Store: f.st, change: func() {
			if demoted {
				return
			}
			demoted = true
			if _, err := f.svc.AdminUpdateUser(ctx, auth.Operator(), adm.UserID, auth.UserPatch{Role: ptr(auth.RoleUser)}, auth.Meta{}); err != nil {
				t.Fatal(err)
			}
		}})
		_, err := svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, auth.Meta{})
		wantCode(t, "AdminUpdateUser by an admin demoted meanwhile", err, "forbidden")
		if u, _ := f.st.UserByID(ctx, target.ID); u.Status != auth.StatusEnabled {
			t.Errorf("target after the refused disable = %s, want enabled", u.Status)
		}
		if _, err := f.svc.AdminUpdateUser(ctx, auth.Operator(), adm.UserID, auth.UserPatch{Role: ptr(auth.RoleAdmin)}, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		demoted = false
		_, err = svc.AdminRevokeSessions(ctx, adm, target.ID, auth.Meta{})
		wantCode(t, "AdminRevokeSessions by an admin demoted meanwhile", err, "forbidden")
		page, err := f.svc.AdminSessions(ctx, auth.Operator(), target.ID, auth.PageQuery{})
		if err != nil || len(page.Sessions) != 1 {
			t.Errorf("AdminSessions(target) = %d sessions, %v; want the 1 session untouched", len(page.Sessions), err)
		}
	})
}

func TestAdminDisableEnable(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		ctx := context.Background()
		target := f.user(t, "target@example.com")
		laptop := f.login(t, "target@example.com", "laptop")
		phone := f.login(t, "target@example.com", "phone")
		adm := f.admin(t, "admin@example.com")
		m := auth.Meta{IP: "192.0.2.7", UserAgent: "admin-ui/1", RequestID: "req-disable"}

		u, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, m)
		if err != nil || u.Status != auth.StatusDisabled {
			t.Fatalf("AdminUpdateUser(disable) = %s, %v; want disabled", u.Status, err)
		}
		for name, rt := range map[string]string{"laptop": laptop.RefreshToken, "phone": phone.RefreshToken} {
			_, err := f.svc.Refresh(ctx, rt, auth.Meta{})
			wantCode(t, "Refresh("+name+") after disable", err, "refresh_token_revoked")
		}
		_, err = f.svc.Login(ctx, auth.LoginInput{Email: "target@example.com", Password: pw}, auth.Meta{})
		wantCode(t, "Login(disabled, right password)", err, "account_disabled")
		_, err = f.svc.Login(ctx, auth.LoginInput{Email: "target@example.com", Password: "wrong password entirely"}, auth.Meta{})
		wantCode(t, "Login(disabled, wrong password)", err, "invalid_credentials")
		page, err := f.svc.AdminSessions(ctx, adm, target.ID, auth.PageQuery{})
		if err != nil || len(page.Sessions) != 0 {
			t.Errorf("AdminSessions after disable = %d sessions, %v; want none", len(page.Sessions), err)
		}

		evs := f.events(t, target.ID, auth.EventUserDisabled)
		if len(evs) != 1 {
			t.Fatalf("audit user.disabled = %d entries, want 1", len(evs))
		}
		e := evs[0]
		d := dataOf(t, e)
		if e.ActorID != adm.UserID || e.IP != m.IP || e.UserAgent != m.UserAgent || e.RequestID != m.RequestID ||
			d["revoked_sessions"] != float64(2) || d["via"] != "api" {
			t.Errorf("audit user.disabled = %+v data %s; want actor %s, the admin's request, 2 revoked sessions, via api", e, e.Data, adm.UserID)
		}

		// Disabling again changes nothing and records nothing.
		if _, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, m); err != nil {
			t.Fatal(err)
		}
		if n := len(f.events(t, target.ID, auth.EventUserDisabled, auth.EventSessionRevoked)); n != 1 {
			t.Errorf("audit after disabling twice = %d entries, want still 1", n)
		}

		if _, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusEnabled)}, m); err != nil {
			t.Fatal(err)
		}
		p := f.login(t, "target@example.com", "laptop")
		if _, err := f.svc.Refresh(ctx, p.RefreshToken, auth.Meta{}); err != nil {
			t.Errorf("Refresh after enable = %v, want nil", err)
		}
		evs = f.events(t, target.ID, auth.EventUserEnabled)
		if len(evs) != 1 || evs[0].ActorID != adm.UserID {
			t.Errorf("audit user.enabled = %+v, want one entry by %s", evs, adm.UserID)
		}
	})
}

func TestAdminUpdateFields(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	target := f.user(t, "target@example.com")
	adm := f.admin(t, "admin@example.com")

	u, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Role: ptr("auditor"), TenantID: ptr("t-1"), OrganizationID: ptr("")}, auth.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != "auditor" || u.TenantID != "t-1" || u.OrganizationID != "" || u.Status != auth.StatusEnabled {
		t.Errorf("AdminUpdateUser = role %q tenant %q org %q status %q, want auditor, t-1, \"\", enabled", u.Role, u.TenantID, u.OrganizationID, u.Status)
	}
	if got, _ := f.svc.AdminUser(ctx, adm, target.ID); got.Role != "auditor" || got.TenantID != "t-1" {
		t.Errorf("AdminUser after update = %q/%q, want auditor/t-1", got.Role, got.TenantID)
	}
	evs := f.events(t, target.ID, auth.EventUserUpdated)
	if len(evs) != 1 {
		t.Fatalf("audit user.updated = %d entries, want 1", len(evs))
	}
	want := map[string]any{
		"role":      map[string]any{"from": "user", "to": "auditor"},
		"tenant_id": map[string]any{"from": "", "to": "t-1"},
	}
	if d := dataOf(t, evs[0]); fmt.Sprint(d["changes"]) != fmt.Sprint(want) || evs[0].ActorID != adm.UserID {
		t.Errorf("audit user.updated data = %s actor %q, want changes %v by %s", evs[0].Data, evs[0].ActorID, want, adm.UserID)
	}
	if n := len(f.events(t, target.ID, auth.EventUserDisabled, auth.EventUserEnabled)); n != 0 {
		t.Errorf("a change without status wrote %d status events, want none", n)
	}

	// The operator's actions are recorded as the CLI's.
	if _, err := f.svc.AdminUpdateUser(ctx, auth.Operator(), target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled)}, auth.Meta{}); err != nil {
		t.Fatal(err)
	}
	evs = f.events(t, target.ID, auth.EventUserDisabled)
	if len(evs) != 1 || evs[0].ActorID != "" || dataOf(t, evs[0])["via"] != "cli" {
		t.Errorf("audit user.disabled by the operator = %+v, want no actor and via cli", evs)
	}

	_, err = f.svc.AdminUpdateUser(ctx, adm, "no-such-user", auth.UserPatch{Role: ptr("x")}, auth.Meta{})
	wantCode(t, "AdminUpdateUser(unknown)", err, "not_found")
	_, err = f.svc.AdminUpdateUser(ctx, adm, "no-such-user", auth.UserPatch{}, auth.Meta{})
	wantCode(t, "AdminUpdateUser(unknown, empty)", err, "not_found")
	_, err = f.svc.AdminUser(ctx, adm, "no-such-user")
	wantCode(t, "AdminUser(unknown)", err, "not_found")
	_, err = f.svc.AdminSessions(ctx, adm, "no-such-user", auth.PageQuery{})
	wantCode(t, "AdminSessions(unknown)", err, "not_found")
	_, err = f.svc.AdminRevokeSessions(ctx, adm, "no-such-user", auth.Meta{})
	wantCode(t, "AdminRevokeSessions(unknown)", err, "not_found")
	byEmail, err := f.svc.AdminFindUser(ctx, adm, "  Target@Example.com")
	if err != nil || byEmail.ID != target.ID {
		t.Errorf("AdminFindUser(email) = %s, %v, want %s", byEmail.ID, err, target.ID)
	}
}

func TestAdminUpdateValidation(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	target := f.user(t, "target@example.com")
	adm := f.admin(t, "admin@example.com")
	long := string(make([]byte, 201))
	for _, tc := range []struct {
		name  string
		patch auth.UserPatch
		field string
	}{
		{"StatusUnknown", auth.UserPatch{Status: ptr("locked")}, "status"},
		{"StatusEmpty", auth.UserPatch{Status: ptr("")}, "status"},
		{"StatusCase", auth.UserPatch{Status: ptr("Disabled")}, "status"},
		{"RoleEmpty", auth.UserPatch{Role: ptr("")}, "role"},
		{"RoleSpace", auth.UserPatch{Role: ptr("super admin")}, "role"},
		{"RoleLeadingDash", auth.UserPatch{Role: ptr("-admin")}, "role"},
		{"RoleTooLong", auth.UserPatch{Role: ptr("r" + string(slices.Repeat([]byte("x"), 64)))}, "role"},
		{"RoleNonASCII", auth.UserPatch{Role: ptr("ädmin")}, "role"},
		{"TenantSpace", auth.UserPatch{TenantID: ptr("a b")}, "tenant_id"},
		{"TenantControl", auth.UserPatch{TenantID: ptr("a\nb")}, "tenant_id"},
		{"OrganizationTooLong", auth.UserPatch{OrganizationID: ptr(long)}, "organization_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, tc.patch, auth.Meta{})
			e := apperr.As(err)
			if e.Code != "validation_failed" || e.Kind != apperr.KindUnprocessable || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
				t.Errorf("AdminUpdateUser(%s) = %v (fields %+v), want validation_failed on %s", tc.name, err, e.Fields, tc.field)
			}
		})
	}
	for _, role := range []string{"admin", "user", "billing.reader", "org:owner", "Team_Lead-2"} {
		if _, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Role: ptr(role)}, auth.Meta{}); err != nil {
			t.Errorf("AdminUpdateUser(role %q) = %v, want nil", role, err)
		}
	}
}

func TestAdminUsersPages(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		ctx := context.Background()
		adm := f.admin(t, "admin@example.org")
		var want []string
		want = append(want, adm.UserID)
		for i := range 7 {
			// Every second user shares the previous one's creation time.
			if i%2 == 0 {
				f.clock.Advance(time.Second)
			}
			want = append(want, f.user(t, fmt.Sprintf("user%d@example.com", i)).ID)
		}
		all, err := f.svc.AdminUsers(ctx, adm, auth.UserQuery{})
		if err != nil || all.Next != "" || len(all.Users) != len(want) {
			t.Fatalf("AdminUsers({}) = %d users, next %q, %v; want %d, no next", len(all.Users), all.Next, err, len(want))
		}
		var ordered []string
		for _, u := range all.Users {
			ordered = append(ordered, u.ID)
		}
		for _, limit := range []int{1, 2, 3, 8} {
			var got []string
			q := auth.UserQuery{Limit: limit}
			for pages := 0; ; pages++ {
				if pages > len(want) {
					t.Fatalf("AdminUsers(limit %d) did not end", limit)
				}
				page, err := f.svc.AdminUsers(ctx, adm, q)
				if err != nil {
					t.Fatalf("AdminUsers(%+v) = %v", q, err)
				}
				if len(page.Users) > limit || len(page.Users) == 0 {
					t.Fatalf("AdminUsers(%+v) = %d users, want 1 to %d", q, len(page.Users), limit)
				}
				for _, u := range page.Users {
					got = append(got, u.ID)
				}
				if page.Next == "" {
					break
				}
				q.Cursor = page.Next
			}
			if !slices.Equal(got, ordered) {
				t.Errorf("AdminUsers pages of %d = %q, want %q", limit, got, ordered)
			}
		}
		filtered, err := f.svc.AdminUsers(ctx, adm, auth.UserQuery{Email: " EXAMPLE.COM"})
		if err != nil || len(filtered.Users) != 7 {
			t.Errorf("AdminUsers(email example.com) = %d users, %v; want 7", len(filtered.Users), err)
		}
	})
}

func TestAdminPageErrors(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	adm := f.admin(t, "admin@example.com")
	f.user(t, "a@example.com")
	f.user(t, "b@example.com")
	users, err := f.svc.AdminUsers(ctx, adm, auth.UserQuery{Limit: 1})
	if err != nil || users.Next == "" {
		t.Fatalf("AdminUsers(limit 1) = next %q, %v; want a cursor", users.Next, err)
	}
	audit, err := f.svc.AdminAudit(ctx, adm, auth.AuditQuery{Limit: 1})
	if err != nil || audit.Next == "" {
		t.Fatalf("AdminAudit(limit 1) = next %q, %v; want a cursor", audit.Next, err)
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name   string
		limit  int
		cursor string
		field  string
	}{
		{"LimitNegative", -1, "", "limit"},
		{"LimitTooLarge", auth.MaxPageSize + 1, "", "limit"},
		{"CursorGarbage", 0, "not a cursor!", "cursor"},
		{"CursorNotJSON", 0, b64("hello"), "cursor"},
		{"CursorOtherList", 0, audit.Next, "cursor"},
		{"CursorNoID", 0, b64(`{"l":"users","t":"2025-01-01T00:00:00Z","i":""}`), "cursor"},
		{"CursorNoTime", 0, b64(`{"l":"users","i":"x"}`), "cursor"},
		{"CursorExtraField", 0, b64(`{"l":"users","t":"2025-01-01T00:00:00Z","i":"x","sql":"1"}`), "cursor"},
		{"CursorTooLong", 0, users.Next + string(slices.Repeat([]byte("A"), 600)), "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.AdminUsers(ctx, adm, auth.UserQuery{Limit: tc.limit, Cursor: tc.cursor})
			e := apperr.As(err)
			if e.Code != "malformed_request" || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
				t.Errorf("AdminUsers(limit %d, cursor %q) = %v (fields %+v), want malformed_request on %s", tc.limit, tc.cursor, err, e.Fields, tc.field)
			}
		})
	}
	if _, err := f.svc.AdminUsers(ctx, adm, auth.UserQuery{Limit: auth.MaxPageSize, Cursor: users.Next}); err != nil {
		t.Errorf("AdminUsers(max limit, valid cursor) = %v, want nil", err)
	}
	_, err = f.svc.AdminAudit(ctx, adm, auth.AuditQuery{Cursor: users.Next})
	wantCode(t, "AdminAudit(a users cursor)", err, "malformed_request")
	_, err = f.svc.AdminSessions(ctx, adm, adm.UserID, auth.PageQuery{Cursor: users.Next})
	wantCode(t, "AdminSessions(a users cursor)", err, "malformed_request")
}

// TestAdminAuditPages: the fixture's clock stands still, so every entry
// shares one time and only the id orders them; pages must neither skip nor
// repeat an entry.
func TestAdminAuditPages(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 0)
		ctx := context.Background()
		adm := f.admin(t, "admin@example.com")
		target := f.user(t, "target@example.com")
		f.login(t, "target@example.com", "d1")
		f.login(t, "target@example.com", "d2")
		if _, err := f.svc.AdminUpdateUser(ctx, adm, target.ID, auth.UserPatch{Status: ptr(auth.StatusDisabled), Role: ptr("x")}, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		n, err := f.svc.AdminRevokeSessions(ctx, adm, target.ID, auth.Meta{})
		if err != nil || n != 0 {
			t.Errorf("AdminRevokeSessions(disabled user) = %d, %v; want 0 (disable revoked them)", n, err)
		}
		full, err := f.svc.AdminAudit(ctx, adm, auth.AuditQuery{UserID: target.ID})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range full.Events {
			types = append(types, e.Type)
		}
		want := []string{"user.registered", "user.logged_in", "user.logged_in", "user.disabled", "user.updated", "session.revoked"}
		if got := slices.Sorted(slices.Values(types)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Fatalf("AdminAudit(user) types = %q, want %q in some order", types, want)
		}
		for i := 1; i < len(full.Events); i++ {
			a, b := full.Events[i-1], full.Events[i]
			if a.OccurredAt.Before(b.OccurredAt) || a.OccurredAt.Equal(b.OccurredAt) && a.ID < b.ID {
				t.Errorf("AdminAudit order: %s (%s) before %s (%s), want newest first, then id descending", a.ID, a.OccurredAt, b.ID, b.OccurredAt)
			}
		}
		for _, limit := range []int{1, 2, 4} {
			var got []string
			q := auth.AuditQuery{UserID: target.ID, Limit: limit}
			for pages := 0; ; pages++ {
				if pages > len(full.Events) {
					t.Fatalf("AdminAudit(limit %d) did not end", limit)
				}
				page, err := f.svc.AdminAudit(ctx, adm, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Events {
					got = append(got, e.ID)
				}
				if page.Next == "" {
					break
				}
				q.Cursor = page.Next
			}
			var ids []string
			for _, e := range full.Events {
				ids = append(ids, e.ID)
			}
			if !slices.Equal(got, ids) {
				t.Errorf("AdminAudit pages of %d = %q, want %q", limit, got, ids)
			}
		}
		byType, err := f.svc.AdminAudit(ctx, adm, auth.AuditQuery{UserID: target.ID, Type: "user.logged_in"})
		if err != nil || len(byType.Events) != 2 {
			t.Errorf("AdminAudit(type user.logged_in) = %d events, %v; want 2", len(byType.Events), err)
		}
		now := f.clock.Now()
		for _, tc := range []struct {
			name         string
			since, until time.Time
			want         int
		}{
			{"SinceNow", now, time.Time{}, len(full.Events)},
			{"SinceLater", now.Add(time.Second), time.Time{}, 0},
			{"UntilNow", time.Time{}, now, 0},
			{"UntilLater", time.Time{}, now.Add(time.Second), len(full.Events)},
		} {
			got, err := f.svc.AdminAudit(ctx, adm, auth.AuditQuery{UserID: target.ID, Since: tc.since, Until: tc.until})
			if err != nil || len(got.Events) != tc.want {
				t.Errorf("AdminAudit(%s) = %d events, %v; want %d", tc.name, len(got.Events), err, tc.want)
			}
		}
	})
}

func TestAdminRevokeSessions(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	adm := f.admin(t, "admin@example.com")
	target := f.user(t, "target@example.com")
	p1 := f.login(t, "target@example.com", "d1")
	f.login(t, "target@example.com", "d2")
	admSession := f.login(t, "admin@example.com", "admin-laptop")
	adm.SessionID = admSession.SessionID

	own, err := f.svc.AdminSessions(ctx, adm, adm.UserID, auth.PageQuery{})
	if err != nil || len(own.Sessions) != 1 || !own.Sessions[0].Current {
		t.Errorf("AdminSessions(own) = %+v, %v; want one current session", own.Sessions, err)
	}
	page, err := f.svc.AdminSessions(ctx, adm, target.ID, auth.PageQuery{Limit: 1})
	if err != nil || len(page.Sessions) != 1 || page.Next == "" || page.Sessions[0].Current {
		t.Fatalf("AdminSessions(limit 1) = %+v, next %q, %v; want one session that is not current, and a cursor", page.Sessions, page.Next, err)
	}
	rest, err := f.svc.AdminSessions(ctx, adm, target.ID, auth.PageQuery{Limit: 1, Cursor: page.Next})
	if err != nil || len(rest.Sessions) != 1 || rest.Next != "" || rest.Sessions[0].ID == page.Sessions[0].ID {
		t.Errorf("AdminSessions(second page) = %+v, next %q, %v; want the other session and no cursor", rest.Sessions, rest.Next, err)
	}

	n, err := f.svc.AdminRevokeSessions(ctx, adm, target.ID, auth.Meta{RequestID: "req-revoke"})
	if err != nil || n != 2 {
		t.Fatalf("AdminRevokeSessions = %d, %v; want 2", n, err)
	}
	_, err = f.svc.Refresh(ctx, p1.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh after AdminRevokeSessions", err, "refresh_token_revoked")
	evs := f.events(t, target.ID, auth.EventSessionRevoked)
	if len(evs) != 1 || evs[0].ActorID != adm.UserID || evs[0].RequestID != "req-revoke" || dataOf(t, evs[0])["revoked_sessions"] != float64(2) {
		t.Errorf("audit session.revoked = %+v, want one by %s with 2 revoked sessions", evs, adm.UserID)
	}
	// The user is not disabled: logging in again works.
	f.login(t, "target@example.com", "d1")
	// The admin's own session is untouched.
	if _, err := f.svc.Refresh(ctx, admSession.RefreshToken, auth.Meta{}); err != nil {
		t.Errorf("Refresh(admin's session) = %v, want nil", err)
	}
}
