package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var userTxTests = []subtest{
	{"NotFound", testWithUserNotFound},
	{"CommitAndRollback", testWithUserCommitRollback},
	{"OnlyTheLockedUser", testWithUserOnlyItsUser},
	{"NotAfterItEnds", testWithUserAfterReturn},
	{"Queues", testWithUserQueues},
	{"ManyWriters", testWithUserManyWriters},
	{"Update", testWithUserUpdate},
	{"RevokeSessions", testWithUserRevokeSessions},
}

// withUser runs fn in s.WithUser and fails the test when that fails.
func withUser(t *testing.T, s store.Store, userID string, fn func(store.UserTx) error) {
	t.Helper()
	if err := s.WithUser(t.Context(), userID, fn); err != nil {
		t.Fatalf("WithUser(%s) = %v, want nil", userID, err)
	}
}

func testWithUserNotFound(t *testing.T, s store.Store) {
	called := false
	err := s.WithUser(t.Context(), newID(t), func(store.UserTx) error { called = true; return nil })
	wantErr(t, "WithUser(unknown)", err, store.ErrNotFound)
	if called {
		t.Error("WithUser(unknown) called fn, want it not called")
	}
}

// What fn writes commits with it, or, when fn fails, none of it does; User
// is the row as locked, with fn's own changes.
func testWithUserCommitRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdA$bmV3aGFzaA"
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		checkSame(t, "UserTx.User()", tx.User(), u)
		if _, err := tx.RevokeSession(ctx, sess.ID, "rolled back", t0); err != nil {
			return err
		}
		if err := tx.SetPasswordHash(ctx, hash, t0); err != nil {
			return err
		}
		if got := tx.User(); got.PasswordHash != hash {
			t.Errorf("UserTx.User() after SetPasswordHash = hash %q, want the new one", got.PasswordHash)
		}
		return errAbort
	})
	wantErr(t, "WithUser(failing fn)", err, errAbort)
	got, err := s.UserByID(ctx, u.ID)
	wantErr(t, "UserByID", err, nil)
	checkSame(t, "UserByID after the rolled-back WithUser", got, u)
	checkSame(t, "SessionByID after the rolled-back WithUser", mustSession(t, s, sess.ID), sess)
	checkSame(t, "RefreshTokenByHash after the rolled-back WithUser", mustToken(t, s, tok.Hash), tok)

	withUser(t, s, u.ID, func(tx store.UserTx) error {
		changed, err := tx.RevokeSession(ctx, sess.ID, "logout", t0)
		if !changed || err != nil {
			t.Errorf("UserTx.RevokeSession = %v, %v; want true, nil", changed, err)
		}
		if got := mustToken(t, s, tok.Hash); got.RevokedAt != nil {
			t.Errorf("revocation visible outside the uncommitted transaction")
		}
		return tx.SetPasswordHash(ctx, hash, t0)
	})
	if got := mustSession(t, s, sess.ID); got.RevokedAt == nil || got.RevokeReason != "logout" {
		t.Errorf("session after WithUser(revoke) = revoked %v reason %q, want revoked for logout", got.RevokedAt, got.RevokeReason)
	}
	if got := mustToken(t, s, tok.Hash); got.RevokedAt == nil || !got.RevokedAt.Equal(t0) {
		t.Errorf("refresh token after WithUser(revoke) = revoked %v, want t0", got.RevokedAt)
	}
	if got, _ := s.UserByID(ctx, u.ID); got.PasswordHash != hash || !got.UpdatedAt.Equal(t0) {
		t.Errorf("user after WithUser(SetPasswordHash) = %q updated %v, want the new hash at t0", got.PasswordHash, got.UpdatedAt)
	}
}

// A UserTx writes its own user's rows and no other's: records of another
// user are refused (ErrOtherUser), another user's session or token is not
// found, and nothing of the other user changes.
func testWithUserOnlyItsUser(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other := newUser(t, s), newUser(t, s)
	theirs := newSession(t, s, other.ID)
	theirTok := newToken(t, s, theirs)
	theirOT := store.OneTimeToken{Hash: newHash(t), UserID: other.ID, Purpose: store.PurposeVerifyEmail, CreatedAt: t0, ExpiresAt: at(time.Hour)}
	if err := s.CreateOneTimeToken(ctx, theirOT); err != nil {
		t.Fatal(err)
	}
	withUser(t, s, u.ID, func(tx store.UserTx) error {
		sess := store.Session{ID: newID(t), UserID: other.ID, DeviceID: "d", CreatedAt: t0, LastUsedAt: t0, ExpiresAt: at(time.Hour), MaxExpiresAt: at(time.Hour)}
		wantErr(t, "UserTx.CreateSession(other's)", tx.CreateSession(ctx, sess), store.ErrOtherUser)
		wantErr(t, "UserTx.CreateRefreshToken(other's)", tx.CreateRefreshToken(ctx,
			store.RefreshToken{Hash: newHash(t), SessionID: theirs.ID, UserID: other.ID, IssuedAt: t0, ExpiresAt: at(time.Hour)}), store.ErrOtherUser)
		wantErr(t, "UserTx.CreateRefreshToken(own user, other's session)", tx.CreateRefreshToken(ctx,
			store.RefreshToken{Hash: newHash(t), SessionID: theirs.ID, UserID: u.ID, IssuedAt: t0, ExpiresAt: at(time.Hour)}), store.ErrOtherUser)
		changed, err := tx.RevokeSession(ctx, theirs.ID, "x", t0)
		wantErr(t, "UserTx.RevokeSession(other's)", err, store.ErrNotFound)
		if changed {
			t.Error("UserTx.RevokeSession(other's) changed = true")
		}
		wantErr(t, "UserTx.TouchSession(other's)", tx.TouchSession(ctx, theirs.ID, theirTok.Hash, t0, "", ""), store.ErrNotFound)
		_, err = tx.ConsumeOneTimeToken(ctx, theirOT.Hash, theirOT.Purpose, t0)
		wantErr(t, "UserTx.ConsumeOneTimeToken(other's)", err, store.ErrNotFound)
		wantErr(t, "UserTx.CreateOneTimeToken(other's)", tx.CreateOneTimeToken(ctx,
			store.OneTimeToken{Hash: newHash(t), UserID: other.ID, Purpose: store.PurposeVerifyEmail, CreatedAt: t0, ExpiresAt: at(time.Hour)}), store.ErrOtherUser)
		wantErr(t, "UserTx.EnqueueMail(other's)", tx.EnqueueMail(ctx, store.MailJob{ID: newID(t), Kind: store.PurposeVerifyEmail, UserID: other.ID, To: other.Email, CreatedAt: t0, NextAttemptAt: t0}), store.ErrOtherUser)
		wantErr(t, "UserTx.AppendAudit(other's)", tx.AppendAudit(ctx, store.AuditEvent{ID: newID(t), Type: "x", OccurredAt: t0, UserID: other.ID, Data: []byte("{}")}), store.ErrOtherUser)
		if _, err := tx.RevokeSessions(ctx, "mine", t0); err != nil {
			return err
		}
		got, err := tx.UserByID(ctx, other.ID)
		wantErr(t, "UserTx.UserByID(other)", err, nil)
		checkSame(t, "UserTx.UserByID(other)", got, other)
		return nil
	})
	checkSame(t, "other's session", mustSession(t, s, theirs.ID), theirs)
	checkSame(t, "other's refresh token", mustToken(t, s, theirTok.Hash), theirTok)
	if got, err := s.OneTimeTokenByHash(ctx, theirOT.Hash); err != nil || got.UsedAt != nil {
		t.Errorf("other's one-time token = used %v, %v; want unused", got.UsedAt, err)
	}
	if got := auditOf(t, s, other.ID, ""); len(got) != 0 {
		t.Errorf("other user has %d audit entries, want none", len(got))
	}
}

// A UserTx kept past its function writes nothing.
func testWithUserAfterReturn(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	var kept store.UserTx
	withUser(t, s, u.ID, func(tx store.UserTx) error { kept = tx; return nil })
	_, err := kept.RevokeSessions(ctx, "late", t0)
	wantErr(t, "UserTx.RevokeSessions after WithUser returned", err, store.ErrTxDone)
	wantErr(t, "UserTx.SetPasswordHash after WithUser returned", kept.SetPasswordHash(ctx, "late", t0), store.ErrTxDone)
	checkSame(t, "session", mustSession(t, s, sess.ID), sess)
	checkSame(t, "user", mustUser(t, s, u.ID), u)
}

// A second WithUser of one user waits for the first to commit and then
// sees what it wrote, in User and in the rows.
func testWithUserQueues(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	done := make(chan error, 1)
	var seen store.User
	var revoked []string
	withUser(t, s, u.ID, func(tx store.UserTx) error {
		if _, err := tx.Update(ctx, store.UserChange{Status: ptr(store.StatusDisabled)}, t0); err != nil {
			return err
		}
		go func() {
			done <- s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
				seen = tx.User()
				var err error
				revoked, err = tx.RevokeSessions(ctx, "second", at(time.Second))
				return err
			})
		}()
		return waitBlocked(ctx, s, "a second WithUser", done)
	})
	if err := <-done; err != nil {
		t.Fatalf("second WithUser = %v", err)
	}
	if seen.Status != store.StatusDisabled {
		t.Errorf("second WithUser saw status %q, want the first's %q", seen.Status, store.StatusDisabled)
	}
	if len(revoked) != 1 || revoked[0] != sess.ID {
		t.Errorf("second WithUser revoked %q, want [%s]", revoked, sess.ID)
	}
}

// More writers of one user at once than the pool has connections all
// finish: each waits for the row holding a connection, so the one that
// holds the row must need no other. Preparing a statement not used yet
// took one from the pool, and 100 concurrent logins to one account on a
// fresh replica stalled until their clients gave up, 30 s on.
func testWithUserManyWriters(t *testing.T, s store.Store) {
	u := newUser(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a failure ceiling
	defer cancel()
	const writers = 64
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			errs <- s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
				return tx.SetPasswordHash(ctx, fmt.Sprintf("$argon2id$writer-%d", i), at(time.Duration(i)*time.Second))
			})
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("one of %d concurrent writers of one user = %v, want nil", writers, err)
		}
	}
}

func testWithUserUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other := newUser(t, s), newUser(t, s)
	now := at(time.Minute)
	var after store.User
	withUser(t, s, u.ID, func(tx store.UserTx) error {
		var err error
		after, err = tx.Update(ctx, store.UserChange{Status: ptr(store.StatusDisabled), Role: ptr("admin"), TenantID: ptr(""), OrganizationID: ptr("org-2")}, now)
		return err
	})
	want := u
	want.Status, want.Role, want.TenantID, want.OrganizationID, want.UpdatedAt = store.StatusDisabled, "admin", "", "org-2", now
	checkSame(t, "UserTx.Update", after, want)
	checkSame(t, "UserByID after UserTx.Update", mustUser(t, s, u.ID), want)
	checkSame(t, "UserByID(other) after UserTx.Update", mustUser(t, s, other.ID), other)
}

func testWithUserRevokeSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other := newUser(t, s), newUser(t, s)
	a, b := newSession(t, s, u.ID), newSession(t, s, u.ID)
	ta, tb := newToken(t, s, a), newToken(t, s, b)
	theirs := newSession(t, s, other.ID)
	var ids []string
	withUser(t, s, u.ID, func(tx store.UserTx) error {
		var err error
		ids, err = tx.RevokeSessions(ctx, "logout_all", t0)
		return err
	})
	if len(ids) != 2 {
		t.Errorf("UserTx.RevokeSessions = %q, want %s and %s", ids, a.ID, b.ID)
	}
	for _, tok := range []store.RefreshToken{ta, tb} {
		if got := mustToken(t, s, tok.Hash); got.RevokedAt == nil {
			t.Errorf("token of session %s not revoked", tok.SessionID)
		}
	}
	checkSame(t, "other's session", mustSession(t, s, theirs.ID), theirs)
	withUser(t, s, u.ID, func(tx store.UserTx) error {
		again, err := tx.RevokeSessions(ctx, "again", at(time.Minute))
		if len(again) != 0 || err != nil {
			t.Errorf("UserTx.RevokeSessions again = %q, %v; want none", again, err)
		}
		return err
	})
}

// mustUser reads a user that must exist.
func mustUser(t *testing.T, s store.Store, id string) store.User {
	t.Helper()
	u, err := s.UserByID(t.Context(), id)
	if err != nil {
		t.Fatalf("UserByID(%s) = %v, want nil", id, err)
	}
	return u
}

// The writes below are the store's user writes as the flows make them:
// each in its own WithUser of the user it writes.

// revokeSession revokes session id in a WithUser of its owner.
func revokeSession(t *testing.T, s store.Store, id, reason string, now time.Time) (changed bool, err error) {
	t.Helper()
	sess, err := s.SessionByID(t.Context(), id)
	if err != nil {
		return false, err
	}
	err = s.WithUser(t.Context(), sess.UserID, func(tx store.UserTx) error {
		changed, err = tx.RevokeSession(t.Context(), id, reason, now)
		return err
	})
	return changed, err
}

// revokeUserSessions revokes every session of the user in a WithUser.
func revokeUserSessions(t *testing.T, s store.Store, userID, reason string, now time.Time) (ids []string, err error) {
	t.Helper()
	err = s.WithUser(t.Context(), userID, func(tx store.UserTx) error {
		ids, err = tx.RevokeSessions(t.Context(), reason, now)
		return err
	})
	return ids, err
}

// setPasswordHash replaces the user's hash in a WithUser.
func setPasswordHash(t *testing.T, s store.Store, userID, hash string, now time.Time) error {
	t.Helper()
	return s.WithUser(t.Context(), userID, func(tx store.UserTx) error { return tx.SetPasswordHash(t.Context(), hash, now) })
}

// setEmailVerified records the user's email verified in a WithUser.
func setEmailVerified(t *testing.T, s store.Store, userID string, at time.Time) error {
	t.Helper()
	return s.WithUser(t.Context(), userID, func(tx store.UserTx) error { return tx.SetEmailVerified(t.Context(), at) })
}

// touchSession records a use of session id, whose live token is current,
// in a WithUser of its owner.
func touchSession(t *testing.T, s store.Store, id, current string, now time.Time, ip, userAgent string) error {
	t.Helper()
	sess, err := s.SessionByID(t.Context(), id)
	if err != nil {
		return err
	}
	return s.WithUser(t.Context(), sess.UserID, func(tx store.UserTx) error { return tx.TouchSession(t.Context(), id, current, now, ip, userAgent) })
}

// updateUser changes the user in a WithUser and returns it before and after.
func updateUser(t *testing.T, s store.Store, id string, ch store.UserChange, now time.Time) (before, after store.User, err error) {
	t.Helper()
	err = s.WithUser(t.Context(), id, func(tx store.UserTx) error {
		before = tx.User()
		after, err = tx.Update(t.Context(), ch, now)
		return err
	})
	return before, after, err
}

// login is one device login as the login flow writes it.
type login struct {
	Session         store.Session
	Token           store.RefreshToken // the session's first refresh token
	NewPasswordHash string             // replaces the user's hash when not ""
	CheckedHash     string             // the hash the password was checked against; "" skips the check
	Opened          store.AuditEvent   // the login itself
	Replaced        store.AuditEvent   // for a replaced session, SessionID set here
}

// openSession writes l in tx as the login flow does: refused with
// ErrPrecondition, writing nothing, when the user is not enabled or its
// hash is no longer l.CheckedHash; otherwise the device's active session
// is replaced (revoked, audited) and l written. It returns the id of the
// replaced session.
func openSession(t *testing.T, tx store.UserTx, l login) (string, error) {
	t.Helper()
	ctx := t.Context()
	if u := tx.User(); u.Status != store.StatusEnabled || (l.CheckedHash != "" && u.PasswordHash != l.CheckedHash) {
		return "", store.ErrPrecondition
	}
	now := l.Session.CreatedAt
	if l.NewPasswordHash != "" {
		if err := tx.SetPasswordHash(ctx, l.NewPasswordHash, now); err != nil {
			return "", err
		}
	}
	replaced := ""
	old, err := tx.ActiveSessionByDevice(ctx, l.Session.DeviceID, now)
	switch {
	case err == nil:
		if _, err := tx.RevokeSession(ctx, old.ID, "replaced", now); err != nil {
			return "", err
		}
		e := l.Replaced
		e.SessionID = old.ID
		if err := tx.AppendAudit(ctx, e); err != nil {
			return "", err
		}
		replaced = old.ID
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	if err := tx.CreateSession(ctx, l.Session); err != nil {
		return "", err
	}
	if err := tx.CreateRefreshToken(ctx, l.Token); err != nil {
		return "", err
	}
	return replaced, tx.AppendAudit(ctx, l.Opened)
}

// openSessionOf runs openSession in a WithUser of l's user.
func openSessionOf(t *testing.T, s store.Store, l login) (replaced string, err error) {
	t.Helper()
	err = s.WithUser(t.Context(), l.Session.UserID, func(tx store.UserTx) error {
		replaced, err = openSession(t, tx, l)
		return err
	})
	return replaced, err
}
