package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

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
	ot := store.OneTimeToken{Hash: newHash(t), Purpose: store.PurposeVerifyEmail, CreatedAt: t0, ExpiresAt: at(time.Hour)}
	err := s.InTx(t.Context(), func(q store.Queries) error {
		u = newUser(t, q)
		ot.UserID = u.ID
		return q.CreateOneTimeToken(t.Context(), ot)
	})
	wantErr(t, "InTx(commit)", err, nil)
	got, err := s.UserByID(t.Context(), u.ID)
	wantErr(t, "UserByID after commit", err, nil)
	checkSame(t, "UserByID after commit", got, u)
	gotOT, err := s.OneTimeTokenByHash(t.Context(), ot.Hash)
	wantErr(t, "OneTimeTokenByHash after commit", err, nil)
	checkSame(t, "OneTimeTokenByHash after commit", gotOT, ot)
}

func testTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	kept := newUser(t, s)
	ot := store.OneTimeToken{Hash: newHash(t), UserID: kept.ID, Purpose: store.PurposeVerifyEmail, CreatedAt: t0, ExpiresAt: at(time.Hour)}
	var u store.User
	err := s.InTx(ctx, func(q store.Queries) error {
		u = newUser(t, q)
		if err := q.CreateOneTimeToken(ctx, ot); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", errAbort)
	})
	wantErr(t, "InTx(failing fn)", err, errAbort)

	_, err = s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID(created in rolled-back tx)", err, store.ErrNotFound)
	_, err = s.OneTimeTokenByHash(ctx, ot.Hash)
	wantErr(t, "OneTimeTokenByHash(created in rolled-back tx)", err, store.ErrNotFound)
	checkSame(t, "UserByID(kept)", mustUser(t, s, kept.ID), kept)
}

func testTxVisibleInside(t *testing.T, s store.Store) {
	ctx := t.Context()
	err := s.InTx(ctx, func(q store.Queries) error {
		u := newUser(t, q)
		got, err := q.UserByID(ctx, u.ID)
		wantErr(t, "Queries.UserByID inside tx", err, nil)
		checkSame(t, "Queries.UserByID inside tx", got, u)
		ot := store.OneTimeToken{Hash: newHash(t), UserID: u.ID, Purpose: store.PurposeVerifyEmail, CreatedAt: t0, ExpiresAt: at(time.Hour)}
		if err := q.CreateOneTimeToken(ctx, ot); err != nil {
			return err
		}
		if _, err := q.ConsumeOneTimeToken(ctx, ot.Hash, ot.Purpose, t0); err != nil {
			t.Errorf("Queries.ConsumeOneTimeToken inside tx = %v, want nil", err)
		}
		if got, err := q.OneTimeTokenByHash(ctx, ot.Hash); err != nil || got.UsedAt == nil {
			t.Errorf("Queries.OneTimeTokenByHash inside tx = used %v, %v; want used at %v", got.UsedAt, err, t0)
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
