package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var userTests = []subtest{
	{"CreateAndGet", testUserCreateAndGet},
	{"OptionalFieldsEmpty", testUserOptionalFieldsEmpty},
	{"DuplicateEmail", testUserDuplicateEmail},
	{"NotFound", testUserNotFound},
	{"SetPasswordHash", testSetPasswordHash},
	{"SetPasswordHashNotFound", testSetPasswordHashNotFound},
}

func testUserCreateAndGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s, func(u *store.User) { u.Role, u.Status = "admin", store.StatusDisabled })
	newUser(t, s) // a neighbour that must not be returned instead

	got, err := s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID", err, nil)
	checkSame(t, "UserByID("+u.ID+")", got, u)

	got, err = s.UserByEmail(ctx, u.EmailNormalized)
	wantErr(t, "UserByEmail", err, nil)
	checkSame(t, "UserByEmail("+u.EmailNormalized+")", got, u)
}

func testUserOptionalFieldsEmpty(t *testing.T, s store.Store) {
	u := newUser(t, s, func(u *store.User) {
		u.Name, u.TenantID, u.OrganizationID, u.EmailVerifiedAt = "", "", "", nil
	})
	got, err := s.UserByID(t.Context(), u.ID)
	wantErr(t, "UserByID", err, nil)
	checkSame(t, "UserByID("+u.ID+")", got, u)
}

func testUserDuplicateEmail(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	dup := u
	dup.ID = newID(t)
	dup.Email = strings.ToUpper(u.Email) // differs, but normalizes the same
	dup.Name = "Impostor"
	wantErr(t, "CreateUser(same EmailNormalized)", s.CreateUser(ctx, dup), store.ErrAlreadyExists)

	got, err := s.UserByEmail(ctx, u.EmailNormalized)
	wantErr(t, "UserByEmail", err, nil)
	checkSame(t, "UserByEmail after duplicate", got, u)
	_, err = s.UserByID(ctx, dup.ID)
	wantErr(t, "UserByID(duplicate)", err, store.ErrNotFound)
}

func testUserNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	newUser(t, s)
	_, err := s.UserByID(ctx, newID(t))
	wantErr(t, "UserByID(unknown)", err, store.ErrNotFound)
	_, err = s.UserByEmail(ctx, "nobody@example.com")
	wantErr(t, "UserByEmail(unknown)", err, store.ErrNotFound)
}

func testSetPasswordHash(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	other := newUser(t, s)
	const hash = "$argon2id$v=19$m=65536,t=3,p=4$bmV3c2FsdA$bmV3aGFzaA"
	now := at(time.Minute)
	wantErr(t, "SetPasswordHash", setPasswordHash(t, s, u.ID, hash, now), nil)

	want := u
	want.PasswordHash, want.UpdatedAt = hash, now
	got, err := s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID", err, nil)
	checkSame(t, "UserByID after SetPasswordHash", got, want)

	got, err = s.UserByID(ctx, other.ID)
	wantErr(t, "UserByID(other)", err, nil)
	checkSame(t, "UserByID(other) after SetPasswordHash", got, other)
}

func testSetPasswordHashNotFound(t *testing.T, s store.Store) {
	err := setPasswordHash(t, s, newID(t), "x", t0)
	wantErr(t, "SetPasswordHash(unknown)", err, store.ErrNotFound)
}
