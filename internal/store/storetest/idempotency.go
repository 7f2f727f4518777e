package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var idempotencyTests = []subtest{
	{"Reserve", testIdemReserve},
	{"Complete", testIdemComplete},
	{"ReplaceOld", testIdemReplaceOld},
	{"Release", testIdemRelease},
	{"ScopesIndependent", testIdemScopesIndependent},
	{"TakeOver", testIdemTakeOver},
	{"TakeOverConcurrent", testIdemTakeOverConcurrent},
	{"TakenOverIsFenced", testIdemTakenOverIsFenced},
}

// window is the notBefore every call passes unless it tests expiry.
var window = at(-24 * time.Hour)

// newRecord returns an unsaved reservation in scope.
func newRecord(t *testing.T, scope string) store.IdempotencyRecord {
	t.Helper()
	return store.IdempotencyRecord{Scope: scope, Key: "key-" + newID(t), RequestHash: newHash(t), CreatedAt: at(-time.Minute)}
}

// reserve calls ReserveIdempotencyKey and checks its error.
func reserve(t *testing.T, s store.Store, r store.IdempotencyRecord, notBefore time.Time, want error) store.IdempotencyRecord {
	t.Helper()
	got, err := s.ReserveIdempotencyKey(t.Context(), r, notBefore)
	wantErr(t, "ReserveIdempotencyKey("+r.Scope+", "+r.Key+")", err, want)
	return got
}

func testIdemReserve(t *testing.T, s store.Store) {
	r := newRecord(t, "register")
	reserve(t, s, r, window, nil)

	again := r
	again.RequestHash, again.CreatedAt = newHash(t), t0
	got := reserve(t, s, again, window, store.ErrAlreadyExists)
	checkSame(t, "ReserveIdempotencyKey(same key) record", got, r) // in progress: Status 0, no body
}

func testIdemComplete(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRecord(t, "register")
	other := newRecord(t, "register")
	reserve(t, s, r, window, nil)
	reserve(t, s, other, window, nil)
	body := []byte("{\"id\":  \"x\", \"a\": 1}\n") // byte-exact: a replay sends the same bytes
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(ctx, r.Scope, r.Key, r.CreatedAt, 201, body), nil)

	want := r
	want.Status, want.Body = 201, body
	again := r
	again.CreatedAt = t0
	checkSame(t, "ReserveIdempotencyKey(completed key) record", reserve(t, s, again, window, store.ErrAlreadyExists), want)
	checkSame(t, "ReserveIdempotencyKey(other key) record", reserve(t, s, other, window, store.ErrAlreadyExists), other)
}

func testIdemReplaceOld(t *testing.T, s store.Store) {
	old := newRecord(t, "password_forgot")
	old.CreatedAt = at(-25 * time.Hour)
	reserve(t, s, old, at(-48*time.Hour), nil)
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(t.Context(), old.Scope, old.Key, old.CreatedAt, 202, []byte(`{"message":"sent"}`)), nil)

	fresh := old
	fresh.RequestHash, fresh.CreatedAt, fresh.Status, fresh.Body = newHash(t), t0, 0, nil
	reserve(t, s, fresh, window, nil) // the old record predates notBefore

	again := fresh
	again.RequestHash = newHash(t)
	checkSame(t, "ReserveIdempotencyKey(replaced key) record", reserve(t, s, again, window, store.ErrAlreadyExists), fresh)
}

func testIdemRelease(t *testing.T, s store.Store) {
	r := newRecord(t, "register")
	kept := newRecord(t, "register")
	reserve(t, s, r, window, nil)
	reserve(t, s, kept, window, nil)
	wantErr(t, "ReleaseIdempotencyKey", s.ReleaseIdempotencyKey(t.Context(), r.Scope, r.Key, r.CreatedAt), nil)

	retry := r
	retry.RequestHash, retry.CreatedAt = newHash(t), t0
	reserve(t, s, retry, window, nil)
	checkSame(t, "ReserveIdempotencyKey(released key) record", reserve(t, s, r, window, store.ErrAlreadyExists), retry)
	checkSame(t, "ReserveIdempotencyKey(other key) record", reserve(t, s, kept, window, store.ErrAlreadyExists), kept)
}

func testIdemScopesIndependent(t *testing.T, s store.Store) {
	a := newRecord(t, "register")
	b := a
	b.Scope, b.RequestHash = "password_forgot", newHash(t)
	reserve(t, s, a, window, nil)
	reserve(t, s, b, window, nil)
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(t.Context(), a.Scope, a.Key, a.CreatedAt, 201, []byte(`{}`)), nil)

	checkSame(t, "ReserveIdempotencyKey(scope b) record", reserve(t, s, b, window, store.ErrAlreadyExists), b)
	wantErr(t, "ReleaseIdempotencyKey(scope b)", s.ReleaseIdempotencyKey(t.Context(), b.Scope, b.Key, b.CreatedAt), nil)
	want := a
	want.Status, want.Body = 201, []byte(`{}`)
	checkSame(t, "ReserveIdempotencyKey(scope a) record", reserve(t, s, a, window, store.ErrAlreadyExists), want)
}

// lease is the staleBefore the takeover tests pass: reservations created
// before it are abandoned.
var lease = at(-time.Minute)

func testIdemTakeOver(t *testing.T, s store.Store) {
	ctx := t.Context()
	stale := newRecord(t, "register")
	stale.CreatedAt = lease.Add(-time.Microsecond)
	fresh := newRecord(t, "register")
	fresh.CreatedAt = lease // not before staleBefore: still running
	done := newRecord(t, "register")
	done.CreatedAt = at(-time.Hour)
	for _, r := range []store.IdempotencyRecord{stale, fresh, done} {
		reserve(t, s, r, window, nil)
	}
	wantErr(t, "CompleteIdempotencyKey(done)", s.CompleteIdempotencyKey(ctx, done.Scope, done.Key, done.CreatedAt, 201, []byte(`{}`)), nil)

	for _, tc := range []struct {
		name string
		r    store.IdempotencyRecord
		hash string
		want error
	}{
		{"within the lease", fresh, fresh.RequestHash, store.ErrNotFound},
		{"completed", done, done.RequestHash, store.ErrNotFound},
		{"other request", stale, newHash(t), store.ErrNotFound},
		{"other scope", store.IdempotencyRecord{Scope: "password_forgot", Key: stale.Key}, stale.RequestHash, store.ErrNotFound},
		{"unknown key", store.IdempotencyRecord{Scope: "register", Key: "key-" + newID(t)}, newHash(t), store.ErrNotFound},
		{"abandoned", stale, stale.RequestHash, nil},
		{"abandoned, taken over already", stale, stale.RequestHash, store.ErrNotFound},
	} {
		err := s.TakeOverIdempotencyKey(ctx, tc.r.Scope, tc.r.Key, tc.hash, lease, t0)
		wantErr(t, "TakeOverIdempotencyKey("+tc.name+")", err, tc.want)
	}

	taken := stale
	taken.CreatedAt = t0
	checkSame(t, "ReserveIdempotencyKey(taken over) record", reserve(t, s, stale, window, store.ErrAlreadyExists), taken)
	checkSame(t, "ReserveIdempotencyKey(within the lease) record", reserve(t, s, fresh, window, store.ErrAlreadyExists), fresh)
	want := done
	want.Status, want.Body = 201, []byte(`{}`)
	checkSame(t, "ReserveIdempotencyKey(completed) record", reserve(t, s, done, window, store.ErrAlreadyExists), want)
}

// testIdemTakeOverConcurrent races n takeovers of one abandoned
// reservation: exactly one wins, the others get ErrNotFound.
func testIdemTakeOverConcurrent(t *testing.T, s store.Store) {
	const n = 20
	ctx := t.Context()
	r := newRecord(t, "register")
	r.CreatedAt = at(-time.Hour)
	reserve(t, s, r, window, nil)

	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			// Each taker its own time, to tell from the record who won.
			errs[i] = s.TakeOverIdempotencyKey(ctx, r.Scope, r.Key, r.RequestHash, lease, at(time.Duration(i)*time.Microsecond))
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("TakeOverIdempotencyKey #%d and #%d = nil, want exactly one nil", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("TakeOverIdempotencyKey #%d = %v, want nil or %v", i, err, store.ErrNotFound)
		}
	}
	if winner < 0 {
		t.Fatalf("TakeOverIdempotencyKey: none of %d takers won, want exactly one", n)
	}
	want := r
	want.CreatedAt = at(time.Duration(winner) * time.Microsecond)
	checkSame(t, "ReserveIdempotencyKey(after the race) record", reserve(t, s, r, window, store.ErrAlreadyExists), want)
}

// testIdemTakenOverIsFenced: the request that abandoned a reservation may
// still finish late; its Complete and Release then leave the reservation
// of the request that took it over alone.
func testIdemTakenOverIsFenced(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRecord(t, "password_forgot")
	r.CreatedAt = at(-time.Hour)
	reserve(t, s, r, window, nil)
	wantErr(t, "TakeOverIdempotencyKey", s.TakeOverIdempotencyKey(ctx, r.Scope, r.Key, r.RequestHash, lease, t0), nil)
	taken := r
	taken.CreatedAt = t0

	wantErr(t, "CompleteIdempotencyKey(by the first owner)",
		s.CompleteIdempotencyKey(ctx, r.Scope, r.Key, r.CreatedAt, 500, []byte(`late`)), store.ErrNotFound)
	wantErr(t, "ReleaseIdempotencyKey(by the first owner)", s.ReleaseIdempotencyKey(ctx, r.Scope, r.Key, r.CreatedAt), nil)
	checkSame(t, "ReserveIdempotencyKey(after the first owner finished late) record",
		reserve(t, s, r, window, store.ErrAlreadyExists), taken)

	wantErr(t, "CompleteIdempotencyKey(by the new owner)",
		s.CompleteIdempotencyKey(ctx, r.Scope, r.Key, taken.CreatedAt, 202, []byte(`{}`)), nil)
	wantErr(t, "ReleaseIdempotencyKey(by the first owner, completed)", s.ReleaseIdempotencyKey(ctx, r.Scope, r.Key, r.CreatedAt), nil)
	wantErr(t, "ReleaseIdempotencyKey(by the new owner, completed)", s.ReleaseIdempotencyKey(ctx, r.Scope, r.Key, taken.CreatedAt), nil)
	want := taken
	want.Status, want.Body = 202, []byte(`{}`)
	checkSame(t, "ReserveIdempotencyKey(completed by the new owner) record", reserve(t, s, r, window, store.ErrAlreadyExists), want)
}
