package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var adminTests = []subtest{
	{"ListUsersOrder", testListUsersOrder},
	{"ListUsersEmailContains", testListUsersEmailContains},
	{"ListUsersPaginate", testListUsersPaginate},
	{"ListSessions", testListSessions},
	{"ListSessionsPaginate", testListSessionsPaginate},
	{"UpdateUser", testUpdateUser},
	{"UpdateUserNotFound", testUpdateUserNotFound},
	{"UpdateUserRollback", testUpdateUserRollback},
	{"UpdateUserConcurrent", testUpdateUserConcurrent},
}

// userList creates users with the given local parts, created in an order
// that is not the listing order, two of them at the same time (to exercise
// the id tie-break). It returns them oldest first: (CreatedAt, ID) ascending.
func userList(t *testing.T, s store.Store) []store.User {
	t.Helper()
	specs := []struct {
		email string
		d     time.Duration
	}{
		{"ada@example.com", -3 * time.Hour},
		{"bob@example.org", -5 * time.Hour},
		{"adam@example.org", -time.Hour},
		{"carol_1@example.net", -2 * time.Hour},
		{"dave@example.com", -4 * time.Hour},
		{"erin@example.com", -90 * time.Minute}, // the tie: same time as the next
		{"frank@example.com", -90 * time.Minute},
		{"grace%@example.com", 0},
	}
	var all []store.User
	for _, sp := range specs {
		all = append(all, newUser(t, s, func(u *store.User) {
			u.Email, u.EmailNormalized = strings.ToUpper(sp.email[:1])+sp.email[1:], sp.email
			u.CreatedAt, u.UpdatedAt = at(sp.d), at(sp.d)
		}))
	}
	slices.SortFunc(all, func(a, b store.User) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return all
}

// listUsers calls ListUsers and fails the test on error.
func listUsers(t *testing.T, q store.Queries, f store.UserFilter) []store.User {
	t.Helper()
	got, err := q.ListUsers(t.Context(), f)
	if err != nil {
		t.Fatalf("ListUsers(%s) = %v, want nil", showJSON(f), err)
	}
	return got
}

func testListUsersOrder(t *testing.T, s store.Store) {
	all := userList(t, s)
	checkSameList(t, "ListUsers({})", listUsers(t, s, store.UserFilter{}), all)
	checkSameList(t, "ListUsers({Limit: 3})", listUsers(t, s, store.UserFilter{Limit: 3}), all[:3])
	checkSameList(t, "ListUsers({Limit: 100})", listUsers(t, s, store.UserFilter{Limit: 100}), all)
	last := all[len(all)-1]
	checkSameList(t, "ListUsers(after the last)", listUsers(t, s, store.UserFilter{
		After: &store.PageCursor{At: last.CreatedAt, ID: last.ID},
	}), []store.User(nil))
}

func testListUsersEmailContains(t *testing.T, s store.Store) {
	all := userList(t, s)
	for _, tc := range []struct {
		contains string
		want     []string // normalized emails, oldest first
	}{
		{"", []string{"bob@example.org", "dave@example.com", "ada@example.com", "carol_1@example.net", "erin@example.com", "frank@example.com", "adam@example.org", "grace%@example.com"}},
		{"ada", []string{"ada@example.com", "adam@example.org"}},
		{"@example.org", []string{"bob@example.org", "adam@example.org"}},
		{"ada@example.com", []string{"ada@example.com"}},
		// Wildcards of LIKE are plain characters here.
		{"%", []string{"grace%@example.com"}},
		{"_", []string{"carol_1@example.net"}},
		{"a%e", nil},
		{"nobody", nil},
	} {
		name := tc.contains
		if name == "" {
			name = "Empty"
		}
		t.Run(name, func(t *testing.T) {
			got := listUsers(t, s, store.UserFilter{EmailContains: tc.contains})
			var emails []string
			for _, u := range got {
				emails = append(emails, u.EmailNormalized)
			}
			if !slices.Equal(emails, tc.want) {
				t.Errorf("ListUsers({EmailContains: %q}) = %q, want %q", tc.contains, emails, tc.want)
			}
			want := keepUsers(all, func(u store.User) bool { return strings.Contains(u.EmailNormalized, tc.contains) })
			checkSameList(t, "ListUsers records", got, want)
		})
	}
}

func keepUsers(us []store.User, f func(store.User) bool) []store.User {
	var out []store.User
	for _, u := range us {
		if f(u) {
			out = append(out, u)
		}
	}
	return out
}

func testListUsersPaginate(t *testing.T, s store.Store) {
	all := userList(t, s)
	for _, tc := range []struct {
		name string
		f    store.UserFilter
		want []store.User
	}{
		{"Limit1", store.UserFilter{Limit: 1}, all},
		{"Limit2", store.UserFilter{Limit: 2}, all},
		{"Limit3", store.UserFilter{Limit: 3}, all},
		{"LimitAll", store.UserFilter{Limit: len(all)}, all},
		{"EmailContains", store.UserFilter{EmailContains: "example.com", Limit: 2},
			keepUsers(all, func(u store.User) bool { return strings.HasSuffix(u.EmailNormalized, "example.com") })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			got := allPages(t, "ListUsers", f.Limit, len(all), func() []store.User { return listUsers(t, s, f) },
				func(last store.User) { f.After = &store.PageCursor{At: last.CreatedAt, ID: last.ID} })
			checkSameList(t, "ListUsers pages of "+showJSON(tc.f), got, tc.want)
		})
	}
}

// sessionList gives a user active sessions (two created at the same time),
// a revoked one and an expired one, and another user an active one. It
// returns the user's id and active sessions newest first.
func sessionList(t *testing.T, s store.Store) (string, []store.Session) {
	t.Helper()
	u, other := newUser(t, s), newUser(t, s)
	created := func(d time.Duration) func(*store.Session) {
		return func(s *store.Session) { s.CreatedAt, s.LastUsedAt = at(d), at(d) }
	}
	active := []store.Session{
		newSession(t, s, u.ID, created(-3*time.Hour)),
		newSession(t, s, u.ID, created(-time.Hour)),
		newSession(t, s, u.ID, created(-2*time.Hour)), // the tie
		newSession(t, s, u.ID, created(-2*time.Hour)),
		newSession(t, s, u.ID, created(-4*time.Hour), func(s *store.Session) { s.ExpiresAt = at(time.Second) }),
	}
	newSession(t, s, u.ID, created(-30*time.Minute), func(s *store.Session) { s.RevokedAt, s.RevokeReason = ptr(at(-time.Minute)), "logout" })
	newSession(t, s, u.ID, created(-5*time.Hour), func(s *store.Session) { s.ExpiresAt = t0 }) // expired at t0
	newSession(t, s, other.ID, created(-time.Minute))
	slices.SortFunc(active, func(a, b store.Session) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return u.ID, active
}

func listSessions(t *testing.T, q store.Queries, f store.SessionFilter) []store.Session {
	t.Helper()
	got, err := q.ListSessions(t.Context(), f)
	if err != nil {
		t.Fatalf("ListSessions(%s) = %v, want nil", showJSON(f), err)
	}
	return got
}

func testListSessions(t *testing.T, s store.Store) {
	userID, active := sessionList(t, s)
	checkSameList(t, "ListSessions(active at t0)", listSessions(t, s, store.SessionFilter{UserID: userID, ActiveAt: t0}), active)
	checkSameList(t, "ListSessions(Limit 2)", listSessions(t, s, store.SessionFilter{UserID: userID, ActiveAt: t0, Limit: 2}), active[:2])
	// One second later the short-lived session has expired too.
	later := slices.DeleteFunc(slices.Clone(active), func(x store.Session) bool { return !x.ExpiresAt.After(at(time.Second)) })
	checkSameList(t, "ListSessions(active at t0+1s)", listSessions(t, s, store.SessionFilter{UserID: userID, ActiveAt: at(time.Second)}), later)
	checkSameList(t, "ListSessions(unknown user)", listSessions(t, s, store.SessionFilter{UserID: newID(t), ActiveAt: t0}), []store.Session(nil))
}

func testListSessionsPaginate(t *testing.T, s store.Store) {
	userID, active := sessionList(t, s)
	for _, limit := range []int{1, 2, 3, len(active)} {
		f := store.SessionFilter{UserID: userID, ActiveAt: t0, Limit: limit}
		got := allPages(t, "ListSessions", limit, len(active), func() []store.Session { return listSessions(t, s, f) },
			func(last store.Session) { f.After = &store.PageCursor{At: last.CreatedAt, ID: last.ID} })
		checkSameList(t, "ListSessions pages of limit "+showJSON(limit), got, active)
	}
}

func testUpdateUser(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		ch   store.UserChange
		mod  func(*store.User)
	}{
		{"Nothing", store.UserChange{}, func(*store.User) {}},
		{"Status", store.UserChange{Status: ptr(store.StatusDisabled)}, func(u *store.User) { u.Status = store.StatusDisabled }},
		{"Role", store.UserChange{Role: ptr("admin")}, func(u *store.User) { u.Role = "admin" }},
		{"TenantID", store.UserChange{TenantID: ptr("tenant-2")}, func(u *store.User) { u.TenantID = "tenant-2" }},
		{"ClearOrganizationID", store.UserChange{OrganizationID: ptr("")}, func(u *store.User) { u.OrganizationID = "" }},
		{"All", store.UserChange{Status: ptr(store.StatusDisabled), Role: ptr("auditor"), TenantID: ptr(""), OrganizationID: ptr("org-9")},
			func(u *store.User) {
				u.Status, u.Role, u.TenantID, u.OrganizationID = store.StatusDisabled, "auditor", "", "org-9"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUser(t, s)
			other := newUser(t, s)
			now := at(time.Minute)
			before, after, err := updateUser(t, s, u.ID, tc.ch, now)
			wantErr(t, "UpdateUser", err, nil)
			want := u
			tc.mod(&want)
			want.UpdatedAt = now
			checkSame(t, "UpdateUser before", before, u)
			checkSame(t, "UpdateUser after", after, want)
			got, err := s.UserByID(ctx, u.ID)
			wantErr(t, "UserByID", err, nil)
			checkSame(t, "UserByID after UpdateUser", got, want)
			got, err = s.UserByID(ctx, other.ID)
			wantErr(t, "UserByID(other)", err, nil)
			checkSame(t, "UserByID(other) after UpdateUser", got, other)
		})
	}
}

func testUpdateUserNotFound(t *testing.T, s store.Store) {
	newUser(t, s)
	_, _, err := updateUser(t, s, newID(t), store.UserChange{Role: ptr("admin")}, t0)
	wantErr(t, "UpdateUser(unknown)", err, store.ErrNotFound)
}

func testUpdateUserRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		if _, err := tx.Update(ctx, store.UserChange{Status: ptr(store.StatusDisabled)}, t0); err != nil {
			return err
		}
		return errAbort
	})
	wantErr(t, "WithUser(Update, then fail)", err, errAbort)
	got, err := s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID", err, nil)
	checkSame(t, "UserByID after the rolled-back UpdateUser", got, u)
}

// testUpdateUserConcurrent races n transactions that each disable one user
// and decide from "before" whether they did it: exactly one may, as the
// product audits user.disabled only for the transaction that changed it.
func testUpdateUserConcurrent(t *testing.T, s store.Store) {
	const n = 10
	ctx := t.Context()
	u := newUser(t, s)
	changed := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
				before := tx.User()
				_, err := tx.Update(ctx, store.UserChange{Status: ptr(store.StatusDisabled)}, at(time.Duration(i)*time.Second))
				changed[i] = before.Status == store.StatusEnabled
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("WithUser(Update) #%d = %v, want nil", i, err)
		}
		if changed[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent UpdateUser calls saw the user enabled before, want exactly 1", winners, n)
	}
	got, err := s.UserByID(ctx, u.ID)
	if err != nil || got.Status != store.StatusDisabled {
		t.Errorf("UserByID after the race = %s, %v, want disabled", show(got), err)
	}
	if errors.Is(err, store.ErrNotFound) {
		t.Fatal("the user vanished")
	}
}
