package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var auditTests = []subtest{
	{"Order", testAuditOrder},
	{"Filters", testAuditFilters},
	{"Paginate", testAuditPaginate},
	{"RoundTrip", testAuditRoundTrip},
}

// auditTrail appends events of two users with distinct times, two sharing a
// time (to exercise the id tie-break), in an order that is not the listing
// order. It returns them newest first: (OccurredAt, ID) descending.
func auditTrail(t *testing.T, s store.Store) (alice, bob string, want []store.AuditEvent) {
	t.Helper()
	alice, bob = newID(t), newID(t)
	ev := func(typ, user string, d time.Duration) store.AuditEvent {
		return store.AuditEvent{
			ID: newID(t), Type: typ, OccurredAt: at(d), UserID: user, SessionID: newID(t),
			IP: "192.0.2.1", UserAgent: "agent/1.0", RequestID: "req-" + newID(t),
			Data: []byte(`{"n":` + fmt.Sprint(int64(d/time.Second)) + `}`),
		}
	}
	events := []store.AuditEvent{
		ev("user.logged_in", alice, -3*time.Hour),
		ev("user.registered", alice, -5*time.Hour),
		ev("refresh_token.used", alice, -time.Hour),
		ev("user.logged_in", bob, -2*time.Hour),
		ev("login.failed", bob, -4*time.Hour),
		ev("user.logged_in", alice, -90*time.Minute), // the tie: same time as the next
		ev("session.revoked", bob, -90*time.Minute),
		ev("user.logged_out", alice, 0),
	}
	for _, e := range events {
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatalf("AppendAudit(%s) = %v, want nil", e.Type, err)
		}
	}
	want = slices.Clone(events)
	slices.SortFunc(want, func(a, b store.AuditEvent) int {
		if c := b.OccurredAt.Compare(a.OccurredAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return alice, bob, want
}

// keep returns the events of es for which f holds.
func keep(es []store.AuditEvent, f func(store.AuditEvent) bool) []store.AuditEvent {
	var out []store.AuditEvent
	for _, e := range es {
		if f(e) {
			out = append(out, e)
		}
	}
	return out
}

// listAudit calls ListAudit and fails the test on error.
func listAudit(t *testing.T, s store.Store, f store.AuditFilter) []store.AuditEvent {
	t.Helper()
	got, err := s.ListAudit(t.Context(), f)
	if err != nil {
		t.Fatalf("ListAudit(%s) = %v, want nil", showJSON(f), err)
	}
	return got
}

func testAuditOrder(t *testing.T, s store.Store) {
	_, _, all := auditTrail(t, s)
	checkSameList(t, "ListAudit({})", listAudit(t, s, store.AuditFilter{}), all)
	checkSameList(t, "ListAudit({Limit: 3})", listAudit(t, s, store.AuditFilter{Limit: 3}), all[:3])
	checkSameList(t, "ListAudit({Limit: 100})", listAudit(t, s, store.AuditFilter{Limit: 100}), all)
}

func testAuditFilters(t *testing.T, s store.Store) {
	alice, bob, all := auditTrail(t, s)
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		keep func(store.AuditEvent) bool
	}{
		{"UserID", store.AuditFilter{UserID: bob},
			func(e store.AuditEvent) bool { return e.UserID == bob }},
		{"UnknownUserID", store.AuditFilter{UserID: newID(t)},
			func(store.AuditEvent) bool { return false }},
		{"Type", store.AuditFilter{Type: "user.logged_in"},
			func(e store.AuditEvent) bool { return e.Type == "user.logged_in" }},
		{"SinceInclusive", store.AuditFilter{Since: at(-2 * time.Hour)},
			func(e store.AuditEvent) bool { return !e.OccurredAt.Before(at(-2 * time.Hour)) }},
		{"UntilExclusive", store.AuditFilter{Until: at(-2 * time.Hour)},
			func(e store.AuditEvent) bool { return e.OccurredAt.Before(at(-2 * time.Hour)) }},
		{"SinceUntil", store.AuditFilter{Since: at(-3 * time.Hour), Until: at(-90 * time.Minute)},
			func(e store.AuditEvent) bool {
				return !e.OccurredAt.Before(at(-3*time.Hour)) && e.OccurredAt.Before(at(-90*time.Minute))
			}},
		{"UserAndType", store.AuditFilter{UserID: alice, Type: "user.logged_in"},
			func(e store.AuditEvent) bool { return e.UserID == alice && e.Type == "user.logged_in" }},
		{"UserAndLimit", store.AuditFilter{UserID: alice, Limit: 2},
			func(e store.AuditEvent) bool { return e.UserID == alice && e.OccurredAt.After(at(-90*time.Minute)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkSameList(t, "ListAudit("+showJSON(tc.f)+")", listAudit(t, s, tc.f), keep(all, tc.keep))
		})
	}
}

func testAuditPaginate(t *testing.T, s store.Store) {
	alice, _, all := auditTrail(t, s)
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want []store.AuditEvent
	}{
		{"Limit1", store.AuditFilter{Limit: 1}, all},
		{"Limit2", store.AuditFilter{Limit: 2}, all},
		{"Limit3", store.AuditFilter{Limit: 3}, all},
		{"LimitAll", store.AuditFilter{Limit: len(all)}, all},
		{"UserID", store.AuditFilter{UserID: alice, Limit: 2},
			keep(all, func(e store.AuditEvent) bool { return e.UserID == alice })},
		{"Since", store.AuditFilter{Since: at(-3 * time.Hour), Limit: 2},
			keep(all, func(e store.AuditEvent) bool { return !e.OccurredAt.Before(at(-3 * time.Hour)) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			got := allPages(t, "ListAudit", f.Limit, len(all), func() []store.AuditEvent { return listAudit(t, s, f) },
				func(last store.AuditEvent) { f.After = &store.PageCursor{At: last.OccurredAt, ID: last.ID} })
			checkSameList(t, "ListAudit pages of "+showJSON(tc.f), got, tc.want)
		})
	}
}

func testAuditRoundTrip(t *testing.T, s store.Store) {
	full := store.AuditEvent{
		ID: newID(t), Type: "user.disabled", OccurredAt: t0, UserID: newID(t), SessionID: newID(t),
		ActorID: newID(t), IP: "2001:db8::1", UserAgent: "agent/1.0 (x; y)", RequestID: "req-1",
		Data: []byte(`{"reason": "abuse", "nested": {"list": [1, 2.5, "three", null, true]}, "unicode": "żółw ✓", "empty": {}}`),
	}
	bare := store.AuditEvent{ID: newID(t), Type: "signing_key.rotated", OccurredAt: at(-time.Minute), Data: []byte(`{}`)}
	for _, e := range []store.AuditEvent{full, bare} {
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatalf("AppendAudit(%s) = %v, want nil", e.Type, err)
		}
	}
	checkSameList(t, "ListAudit({})", listAudit(t, s, store.AuditFilter{}), []store.AuditEvent{full, bare})
}

// allPages follows a list from its first page to its empty one: page
// returns the page at the current cursor, next moves the cursor past the
// page's last entry. Every page holds at most limit entries, and there are
// at most total pages before the empty one.
func allPages[T any](t *testing.T, name string, limit, total int, page func() []T, next func(last T)) []T {
	t.Helper()
	var got []T
	for n := 0; ; n++ {
		if n > total {
			t.Fatalf("%s pagination did not end after %d pages", name, n)
		}
		items := page()
		if len(items) > limit {
			t.Fatalf("%s returned %d entries on a page, want at most %d", name, len(items), limit)
		}
		if len(items) == 0 {
			return got
		}
		got = append(got, items...)
		next(items[len(items)-1])
	}
}
