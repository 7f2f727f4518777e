package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/palisade-auth/palisade/internal/store"
)

var txTests = []subtest{
	{"Commit", testTxCommit},
	{"Rollback", testTxRollback},
	{"VisibleInside", testTxVisibleInside},
	{"SentinelInside", testTxSentinelInside},
	{"Ping", testPing},
}

// errAbort is what a failing transaction function returns.
var errAbort = errors.New("storetest: abort")

func testTxCommit(t *testing.T, s store.Store) {
	var u store.User
	err := s.InTx(t.Context(), func(q store.Queries) error {
		u = newUser(t, q)
		_, err := q.RevokeUserSessions(t.Context(), u.ID, "none", t0)
		return err
	})
	wantErr(t, "InTx(commit)", err, nil)
	got, err := s.UserByID(t.Context(), u.ID)
	wantErr(t, "UserByID after commit", err, nil)
	checkSame(t, "UserByID after commit", got, u)
}

func testTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	kept := newUser(t, s)
	sess := newSession(t, s, kept.ID)
	var u store.User
	err := s.InTx(ctx, func(q store.Queries) error {
		u = newUser(t, q)
		if _, err := q.RevokeSession(ctx, sess.ID, "rolled back", t0); err != nil {
			return err
		}
		if err := q.SetPasswordHash(ctx, kept.ID, "rolled back", t0); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", errAbort)
	})
	wantErr(t, "InTx(failing fn)", err, errAbort)

	_, err = s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID(created in rolled-back tx)", err, store.ErrNotFound)
	got, err := s.UserByID(ctx, kept.ID)
	wantErr(t, "UserByID(kept)", err, nil)
	checkSame(t, "UserByID(updated in rolled-back tx)", got, kept)
	checkSame(t, "SessionByID(revoked in rolled-back tx)", mustSession(t, s, sess.ID), sess)
}

func testTxVisibleInside(t *testing.T, s store.Store) {
	ctx := t.Context()
	err := s.InTx(ctx, func(q store.Queries) error {
		u := newUser(t, q)
		got, err := q.UserByID(ctx, u.ID)
		wantErr(t, "Queries.UserByID inside tx", err, nil)
		checkSame(t, "Queries.UserByID inside tx", got, u)
		sess := newSession(t, q, u.ID)
		tok := newToken(t, q, sess)
		changed, err := q.RevokeSession(ctx, sess.ID, "inside", t0)
		if !changed || err != nil {
			t.Errorf("Queries.RevokeSession inside tx = %v, %v, want true, nil", changed, err)
		}
		if got := mustToken(t, q, tok.Hash); got.RevokedAt == nil {
			t.Errorf("Queries.RefreshTokenByHash inside tx: RevokedAt = nil, want %v", t0)
		}
		return nil
	})
	wantErr(t, "InTx", err, nil)
}

// testTxSentinelInside checks that backends map driver errors to sentinels
// inside a transaction too, and that InTx hands them back unchanged.
func testTxSentinelInside(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	err := s.InTx(ctx, func(q store.Queries) error {
		if _, err := q.UserByID(ctx, newID(t)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Queries.UserByID(unknown) inside tx = %v, want %v", err, store.ErrNotFound)
		}
		dup := u
		dup.ID = newID(t)
		return q.CreateUser(ctx, dup)
	})
	wantErr(t, "InTx(duplicate user)", err, store.ErrAlreadyExists)
}

func testPing(t *testing.T, s store.Store) {
	wantErr(t, "Ping", s.Ping(t.Context()), nil)
}
