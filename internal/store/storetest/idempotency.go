package storetest

import (
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
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(ctx, r.Scope, r.Key, 201, body), nil)

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
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(t.Context(), old.Scope, old.Key, 202, []byte(`{"message":"sent"}`)), nil)

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
	wantErr(t, "ReleaseIdempotencyKey", s.ReleaseIdempotencyKey(t.Context(), r.Scope, r.Key), nil)

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
	wantErr(t, "CompleteIdempotencyKey", s.CompleteIdempotencyKey(t.Context(), a.Scope, a.Key, 201, []byte(`{}`)), nil)

	checkSame(t, "ReserveIdempotencyKey(scope b) record", reserve(t, s, b, window, store.ErrAlreadyExists), b)
	wantErr(t, "ReleaseIdempotencyKey(scope b)", s.ReleaseIdempotencyKey(t.Context(), b.Scope, b.Key), nil)
	want := a
	want.Status, want.Body = 201, []byte(`{}`)
	checkSame(t, "ReserveIdempotencyKey(scope a) record", reserve(t, s, a, window, store.ErrAlreadyExists), want)
}
