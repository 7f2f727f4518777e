package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var revocationTests = []subtest{
	{"EveryRevocationPathWritesOneEntry", testRevocationPaths},
	{"RolledBackWritesNone", testRevocationRolledBack},
	{"AppendRevocationRefusesAnUnknownKind", testRevocationBadKind},
	{"DeltaAfterAMark", testRevocationDelta},
	{"CommitOrder", testRevocationCommitOrder},
	{"LifetimeEnd", testRevocationLifetimeEnd},
	{"NotBeforeHidesOldEntries", testRevocationNotBefore},
	{"Prune", testRevocationPrune},
	{"BadMark", testRevocationBadMark},
	{"Limit", testRevocationLimit},
}

// feedWindow is the feed window of these tests: an access-token TTL plus skew.
const feedWindow = 15*time.Minute + 30*time.Second

// feed reads the revocation feed at t0 after mark (nil: all of it).
func feed(t *testing.T, q store.Queries, after *store.RevocationMark) ([]store.Revocation, store.RevocationMark) {
	t.Helper()
	got, mark, err := q.Revocations(t.Context(), after, at(-feedWindow), t0, 0)
	if err != nil {
		t.Fatalf("Revocations(%+v) = %v, want nil", after, err)
	}
	return got, mark
}

// entry is a feed entry as the tests compare it.
func entry(kind, id string, when time.Time) store.Revocation {
	return store.Revocation{Kind: kind, ID: id, At: when}
}

func checkFeed(t *testing.T, call string, got, want []store.Revocation) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b store.Revocation) bool {
		return a.Kind == b.Kind && a.ID == b.ID && a.At.Equal(b.At)
	}) {
		t.Errorf("%s = %v, want %v", call, got, want)
	}
}

func testRevocationPaths(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	bystander := newSession(t, s, newUser(t, s).ID) // another user's: never in the feed
	_, start := feed(t, s, nil)

	// RevokeSession: one entry; again: none.
	one := newSession(t, s, u.ID)
	newToken(t, s, one)
	if _, err := revokeSession(t, s, one.ID, "logout", at(-3*time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v", err)
	}
	if _, err := revokeSession(t, s, one.ID, "logout", at(-2*time.Minute)); err != nil {
		t.Fatalf("RevokeSession again = %v", err)
	}
	got, mark := feed(t, s, &start)
	checkFeed(t, "Revocations after RevokeSession twice", got, []store.Revocation{entry(store.RevokedSession, one.ID, at(-3*time.Minute))})

	// OpenSession replacing the device's session: one entry, the replaced one.
	dev := "device-" + newID(t)
	old := newSession(t, s, u.ID, func(s *store.Session) { s.DeviceID = dev })
	l := newLogin(t, u.ID, dev)
	l.CheckedHash = u.PasswordHash
	l.Session.CreatedAt, l.Session.LastUsedAt = at(-2*time.Minute), at(-2*time.Minute)
	if replaced, err := openSessionOf(t, s, l); err != nil || replaced != old.ID {
		t.Fatalf("OpenSession = %q, %v; want %q, nil", replaced, err, old.ID)
	}
	got, mark = feed(t, s, &mark)
	checkFeed(t, "Revocations after OpenSession replaced a session", got, []store.Revocation{entry(store.RevokedSession, old.ID, at(-2*time.Minute))})

	// RevokeUserSessions (logout all, password change or reset, reuse,
	// disable): one entry per session it revoked, none for the revoked one.
	ids, err := revokeUserSessions(t, s, u.ID, "logout_all", at(-time.Minute))
	if err != nil || len(ids) != 1 || ids[0] != l.Session.ID {
		t.Fatalf("RevokeUserSessions = %v, %v; want [%s], nil", ids, err, l.Session.ID)
	}
	got, mark = feed(t, s, &mark)
	checkFeed(t, "Revocations after RevokeUserSessions", got, []store.Revocation{entry(store.RevokedSession, l.Session.ID, at(-time.Minute))})

	// A key, through AppendRevocation.
	if err := s.AppendRevocation(ctx, store.RevokedKey, "kid-1", t0); err != nil {
		t.Fatalf("AppendRevocation(key) = %v", err)
	}
	got, mark = feed(t, s, &mark)
	checkFeed(t, "Revocations after AppendRevocation(key)", got, []store.Revocation{entry(store.RevokedKey, "kid-1", t0)})

	got, _ = feed(t, s, &mark)
	checkFeed(t, "Revocations after the last mark", got, nil)
	got, _ = feed(t, s, nil)
	checkFeed(t, "Revocations (all)", got, []store.Revocation{
		entry(store.RevokedSession, one.ID, at(-3*time.Minute)),
		entry(store.RevokedSession, old.ID, at(-2*time.Minute)),
		entry(store.RevokedSession, l.Session.ID, at(-time.Minute)),
		entry(store.RevokedKey, "kid-1", t0),
	})
	if mustSession(t, s, bystander.ID).RevokedAt != nil {
		t.Errorf("the bystander's session was revoked")
	}
}

func testRevocationRolledBack(t *testing.T, s store.Store) {
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	other := newSession(t, s, newUser(t, s).ID)
	dev := "device-" + newID(t)
	replaced := newSession(t, s, u.ID, func(s *store.Session) { s.DeviceID = dev })
	l := newLogin(t, u.ID, dev)
	l.CheckedHash = u.PasswordHash
	failed := errors.New("roll back")
	err := s.WithUser(t.Context(), u.ID, func(tx store.UserTx) error {
		if got, err := openSession(t, tx, l); err != nil || got != replaced.ID {
			return fmt.Errorf("OpenSession = %q, %v; want %q, nil", got, err, replaced.ID)
		}
		if _, err := tx.RevokeSession(t.Context(), sess.ID, "logout", t0); err != nil {
			return err
		}
		return failed
	})
	wantErr(t, "WithUser(login and logout, then an error)", err, failed)
	err = s.WithUser(t.Context(), other.UserID, func(tx store.UserTx) error {
		if _, err := tx.RevokeSessions(t.Context(), "disabled", t0); err != nil {
			return err
		}
		return failed
	})
	wantErr(t, "WithUser(revoke all, then an error)", err, failed)
	err = s.InTx(t.Context(), func(q store.Queries) error {
		if err := q.AppendRevocation(t.Context(), store.RevokedKey, "kid-1", t0); err != nil {
			return err
		}
		return failed
	})
	wantErr(t, "InTx(key revocation, then an error)", err, failed)
	got, _ := feed(t, s, nil)
	checkFeed(t, "Revocations after a rolled-back transaction", got, nil)
	if mustSession(t, s, replaced.ID).RevokedAt != nil {
		t.Errorf("the rolled-back OpenSession left its replaced session revoked")
	}

	// Committed: there, with the revocation.
	err = s.WithUser(t.Context(), u.ID, func(tx store.UserTx) error {
		_, err := tx.RevokeSession(t.Context(), sess.ID, "logout", t0)
		return err
	})
	wantErr(t, "WithUser(RevokeSession)", err, nil)
	got, _ = feed(t, s, nil)
	checkFeed(t, "Revocations after a committed transaction", got, []store.Revocation{entry(store.RevokedSession, sess.ID, t0)})
}

func testRevocationBadKind(t *testing.T, s store.Store) {
	if err := s.AppendRevocation(t.Context(), "user", "u-1", t0); err == nil {
		t.Errorf("AppendRevocation(kind user) = nil, want an error")
	}
	got, _ := feed(t, s, nil)
	checkFeed(t, "Revocations after a refused append", got, nil)
}

func testRevocationDelta(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Entries come in commit order, not in the order of their times.
	times := []time.Duration{-time.Minute, -5 * time.Minute, -3 * time.Minute}
	var want []store.Revocation
	for i, d := range times {
		kid := fmt.Sprintf("kid-%d", i)
		if err := s.AppendRevocation(ctx, store.RevokedKey, kid, at(d)); err != nil {
			t.Fatalf("AppendRevocation(%s) = %v", kid, err)
		}
		want = append(want, entry(store.RevokedKey, kid, at(d)))
	}
	got, mark := feed(t, s, nil)
	checkFeed(t, "Revocations (all)", got, want)
	if !mark.At.Equal(t0) {
		t.Errorf("Revocations(nil) mark.At = %v, want %v", mark.At, t0)
	}
	again, same := feed(t, s, &mark)
	checkFeed(t, "Revocations(mark) with nothing new", again, nil)
	if same.Position != mark.Position {
		t.Errorf("Revocations(mark) with nothing new moved the position from %q to %q", mark.Position, same.Position)
	}

	u := newUser(t, s)
	a, b := newSession(t, s, u.ID), newSession(t, s, u.ID)
	for _, id := range []string{b.ID, a.ID} {
		if _, err := revokeSession(t, s, id, "logout", t0); err != nil {
			t.Fatalf("RevokeSession(%s) = %v", id, err)
		}
	}
	got, next := feed(t, s, &mark)
	checkFeed(t, "Revocations(mark) after two revocations", got, []store.Revocation{
		entry(store.RevokedSession, b.ID, t0), entry(store.RevokedSession, a.ID, t0),
	})
	got, _ = feed(t, s, &next)
	checkFeed(t, "Revocations(next mark)", got, nil)
	// An old mark still reads everything after it.
	got, _ = feed(t, s, &mark)
	if len(got) != 2 {
		t.Errorf("Revocations(first mark) again = %v, want the two sessions", got)
	}
}

// testRevocationCommitOrder: an entry whose transaction commits after a
// read is in the read after that read's mark, even when it was written
// before an entry the read saw (PostgreSQL draws seq at the write).
func testRevocationCommitOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	var mark store.RevocationMark
	var seen []store.Revocation
	done := make(chan error, 1)
	err := s.InTx(ctx, func(q store.Queries) error {
		if err := q.AppendRevocation(ctx, store.RevokedKey, "kid-early", at(-time.Minute)); err != nil {
			return err
		}
		go func() {
			done <- s.InTx(ctx, func(q store.Queries) error {
				return q.AppendRevocation(ctx, store.RevokedKey, "kid-late", t0)
			})
		}()
		// PostgreSQL commits the second at once; SQLite makes it wait
		// for this one's write lock.
		if err := doneOrBlocked(ctx, s, done); err != nil {
			return err
		}
		var err error
		seen, mark, err = s.Revocations(ctx, nil, at(-feedWindow), t0, 0)
		return err
	})
	if err != nil {
		t.Fatalf("InTx = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the concurrent AppendRevocation = %v", err)
	}
	rest, _ := feed(t, s, &mark)
	var ids []string
	for _, r := range append(seen, rest...) {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if want := []string{"kid-early", "kid-late"}; !slices.Equal(ids, want) {
		t.Errorf("Revocations during the transaction = %v, then after its mark = %v; want each of %v once", seen, rest, want)
	}
	for _, r := range seen {
		if r.ID == "kid-early" {
			t.Errorf("Revocations during the transaction = %v, want no uncommitted entry", seen)
		}
	}
}

// doneOrBlocked returns when the operation whose result arrives on done has
// finished (put back on done) or waits for a lock.
func doneOrBlocked(ctx context.Context, s store.Store, done chan error) error {
	lw, ok := s.(LockWaiter)
	if !ok {
		return fmt.Errorf("the store %T does not report lock waiters (storetest.LockWaiter)", s)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			done <- err
			return nil
		default:
		}
		if n, err := lw.LockWaiters(ctx); err != nil || n > 0 {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("the concurrent operation neither finished nor waited within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// ends makes a session that reached its absolute end at at(d).
func ends(d time.Duration) func(*store.Session) {
	return func(s *store.Session) {
		s.CreatedAt, s.LastUsedAt = at(d-24*time.Hour), at(d-time.Hour)
		s.ExpiresAt, s.MaxExpiresAt = at(d), at(d)
	}
}

func testRevocationLifetimeEnd(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	ended := newSession(t, s, u.ID, ends(-5*time.Minute))
	endedNow := newSession(t, s, u.ID, ends(0))
	newSession(t, s, u.ID, ends(-feedWindow)) // ended before the window
	newSession(t, s, u.ID, ends(time.Hour))   // ends after every read here
	revoked := newSession(t, s, u.ID, ends(-4*time.Minute))
	if _, err := revokeSession(t, s, revoked.ID, "logout", at(-10*time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v", err)
	}

	got, mark := feed(t, s, nil)
	checkFeed(t, "Revocations (all)", got, []store.Revocation{
		entry(store.RevokedSession, revoked.ID, at(-10*time.Minute)),
		entry(store.RevokedSession, ended.ID, at(-5*time.Minute)),
		entry(store.RevokedSession, endedNow.ID, t0),
	})

	// Later: only what ended since the mark.
	later := newSession(t, s, u.ID, ends(time.Minute))
	got, next, err := s.Revocations(ctx, &mark, at(time.Minute-feedWindow), at(2*time.Minute), 0)
	wantErr(t, "Revocations(mark) two minutes later", err, nil)
	checkFeed(t, "Revocations(mark) two minutes later", got, []store.Revocation{entry(store.RevokedSession, later.ID, at(time.Minute))})
	if !next.At.Equal(at(2 * time.Minute)) {
		t.Errorf("Revocations(mark) two minutes later: mark.At = %v, want %v", next.At, at(2*time.Minute))
	}
	// A reader whose clock is behind the mark's reads nothing twice and
	// keeps the mark's time.
	got, back, err := s.Revocations(ctx, &next, at(-feedWindow), t0, 0)
	wantErr(t, "Revocations(mark) with an earlier now", err, nil)
	checkFeed(t, "Revocations(mark) with an earlier now", got, nil)
	if !back.At.Equal(next.At) {
		t.Errorf("Revocations(mark) with an earlier now: mark.At = %v, want %v", back.At, next.At)
	}
	// Revoked after its end: the revocation is the entry.
	if _, err := revokeSession(t, s, later.ID, "logout", at(3*time.Minute)); err != nil {
		t.Fatalf("RevokeSession(ended) = %v", err)
	}
	got, _, err = s.Revocations(ctx, nil, at(3*time.Minute-feedWindow), at(3*time.Minute), 0)
	wantErr(t, "Revocations three minutes later", err, nil)
	checkFeed(t, "Revocations three minutes later", got, []store.Revocation{
		entry(store.RevokedSession, revoked.ID, at(-10*time.Minute)),
		entry(store.RevokedSession, later.ID, at(3*time.Minute)),
		entry(store.RevokedSession, ended.ID, at(-5*time.Minute)),
		entry(store.RevokedSession, endedNow.ID, t0),
	})
}

func testRevocationNotBefore(t *testing.T, s store.Store) {
	ctx := t.Context()
	for kid, when := range map[string]time.Time{"kid-old": at(-feedWindow), "kid-new": at(-feedWindow + time.Microsecond)} {
		if err := s.AppendRevocation(ctx, store.RevokedKey, kid, when); err != nil {
			t.Fatalf("AppendRevocation(%s) = %v", kid, err)
		}
	}
	got, _ := feed(t, s, nil)
	checkFeed(t, "Revocations (notBefore = the old entry's time)", got, []store.Revocation{entry(store.RevokedKey, "kid-new", at(-feedWindow+time.Microsecond))})
}

func testRevocationPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 5 {
		if err := s.AppendRevocation(ctx, store.RevokedKey, fmt.Sprintf("old-%d", i), at(-time.Hour-time.Duration(i)*time.Minute)); err != nil {
			t.Fatalf("AppendRevocation = %v", err)
		}
	}
	if err := s.AppendRevocation(ctx, store.RevokedKey, "fresh", at(-feedWindow)); err != nil {
		t.Fatalf("AppendRevocation = %v", err)
	}
	n, err := s.PruneRevocations(ctx, at(-feedWindow), 3)
	if err != nil || n != 3 {
		t.Fatalf("PruneRevocations(limit 3) = %d, %v; want 3, nil", n, err)
	}
	n, err = s.PruneRevocations(ctx, at(-feedWindow), 3)
	if err != nil || n != 2 {
		t.Fatalf("PruneRevocations(limit 3) again = %d, %v; want 2, nil", n, err)
	}
	// What is left is kept: one hour earlier, it is still in the feed.
	got, mark, err := s.Revocations(ctx, nil, at(-time.Hour*2), t0, 0)
	wantErr(t, "Revocations after pruning", err, nil)
	checkFeed(t, "Revocations after pruning", got, []store.Revocation{entry(store.RevokedKey, "fresh", at(-feedWindow))})

	// Pruned to empty, the sequence goes on: a later entry is after the mark.
	if n, err := s.PruneRevocations(ctx, t0, 10); err != nil || n != 1 {
		t.Fatalf("PruneRevocations(everything) = %d, %v; want 1, nil", n, err)
	}
	if err := s.AppendRevocation(ctx, store.RevokedKey, "next", t0); err != nil {
		t.Fatalf("AppendRevocation = %v", err)
	}
	got, _ = feed(t, s, &mark)
	checkFeed(t, "Revocations(mark) after pruning everything", got, []store.Revocation{entry(store.RevokedKey, "next", t0)})
}

func testRevocationBadMark(t *testing.T, s store.Store) {
	for _, pos := range []string{"x", "-1", "1:", "9:1:", "1:9:12,", "1:9:5,3", " 1", strings.Repeat("9", 30)} {
		_, _, err := s.Revocations(t.Context(), &store.RevocationMark{Position: pos, At: t0}, at(-feedWindow), t0, 0)
		wantErr(t, fmt.Sprintf("Revocations(position %q)", pos), err, store.ErrBadMark)
	}
}

// testRevocationLimit: a limited read returns the first entries in the
// feed's order, entries before sessions reaching their end, and a read
// that comes back short of its limit gives a mark to read on from.
func testRevocationLimit(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	ended := newSession(t, s, u.ID, ends(-time.Minute))
	var want []store.Revocation
	for i := range 4 {
		kid := fmt.Sprintf("kid-%d", i)
		if err := s.AppendRevocation(ctx, store.RevokedKey, kid, at(-time.Duration(i)*time.Minute)); err != nil {
			t.Fatalf("AppendRevocation(%s) = %v", kid, err)
		}
		want = append(want, entry(store.RevokedKey, kid, at(-time.Duration(i)*time.Minute)))
	}
	want = append(want, entry(store.RevokedSession, ended.ID, at(-time.Minute)))
	for _, limit := range []int{1, 3, 5, 6} {
		got, _, err := s.Revocations(ctx, nil, at(-feedWindow), t0, limit)
		wantErr(t, fmt.Sprintf("Revocations(limit %d)", limit), err, nil)
		checkFeed(t, fmt.Sprintf("Revocations(limit %d)", limit), got, want[:min(limit, len(want))])
	}
	all, mark, err := s.Revocations(ctx, nil, at(-feedWindow), t0, len(want)+1)
	wantErr(t, "Revocations(limit past the entries)", err, nil)
	checkFeed(t, "Revocations(limit past the entries)", all, want)
	if err := s.AppendRevocation(ctx, store.RevokedKey, "later", t0); err != nil {
		t.Fatalf("AppendRevocation(later) = %v", err)
	}
	got, _, err := s.Revocations(ctx, &mark, at(-feedWindow), t0, 1)
	wantErr(t, "Revocations(mark, limit 1)", err, nil)
	checkFeed(t, "Revocations(mark, limit 1)", got, []store.Revocation{entry(store.RevokedKey, "later", t0)})
}
