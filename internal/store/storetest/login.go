package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var loginTests = []subtest{
	{"OpenSession", testOpenSession},
	{"OpenSessionReplacesTheDevice", testOpenSessionReplaces},
	{"OpenSessionIsAtomic", testOpenSessionAtomic},
	{"OpenSessionRefusesADisabledUser", testOpenSessionDisabled},
	{"OpenSessionRacesADisable", testOpenSessionRacesDisable},
	{"OpenSessionAfterAPasswordChange", testOpenSessionPasswordChanged},
	{"RevokeUserSessionsWaitsForALogin", testRevokeWaitsForLogin},
}

// newLogin builds a login of user on device at t0, not yet written.
func newLogin(t *testing.T, userID, device string) login {
	t.Helper()
	sess := store.Session{
		ID: newID(t), UserID: userID, DeviceID: device, DeviceName: "Phone", UserAgent: "agent/2.0", IP: "198.51.100.7",
		CreatedAt: t0, LastUsedAt: t0, ExpiresAt: at(14 * 24 * time.Hour), MaxExpiresAt: at(90 * 24 * time.Hour),
	}
	return login{
		Session: sess,
		Token:   store.RefreshToken{Hash: newHash(t), SessionID: sess.ID, UserID: userID, IssuedAt: t0, ExpiresAt: sess.ExpiresAt},
		Opened: store.AuditEvent{ID: newID(t), Type: "user.logged_in", OccurredAt: t0, UserID: userID, SessionID: sess.ID,
			IP: sess.IP, UserAgent: sess.UserAgent, RequestID: "req-1", Data: []byte(`{"device_id":"` + device + `"}`)},
		Replaced: store.AuditEvent{ID: newID(t), Type: "session.revoked", OccurredAt: t0, UserID: userID,
			IP: sess.IP, UserAgent: sess.UserAgent, RequestID: "req-1", Data: []byte(`{"reason":"replaced"}`)},
	}
}

func auditOf(t *testing.T, s store.Store, userID, typ string) []store.AuditEvent {
	t.Helper()
	evs, err := s.ListAudit(t.Context(), store.AuditFilter{UserID: userID, Type: typ, Limit: 100})
	if err != nil {
		t.Fatalf("ListAudit = %v", err)
	}
	return evs
}

func testOpenSession(t *testing.T, s store.Store) {
	u := newUser(t, s)
	l := newLogin(t, u.ID, "phone")
	l.NewPasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdA$bmV3aGFzaA"
	replaced, err := openSessionOf(t, s, l)
	if err != nil || replaced != "" {
		t.Fatalf("OpenSession = %q, %v; want \"\", nil", replaced, err)
	}
	checkSame(t, "SessionByID", mustSession(t, s, l.Session.ID), l.Session)
	checkSame(t, "RefreshTokenByHash", mustToken(t, s, l.Token.Hash), l.Token)
	checkSameList(t, "ListAudit(user.logged_in)", auditOf(t, s, u.ID, "user.logged_in"), []store.AuditEvent{l.Opened})
	if got := auditOf(t, s, u.ID, "session.revoked"); len(got) != 0 {
		t.Errorf("ListAudit(session.revoked) = %d entries, want none", len(got))
	}
	got, err := s.UserByID(t.Context(), u.ID)
	if err != nil || got.PasswordHash != l.NewPasswordHash || !got.UpdatedAt.Equal(t0) {
		t.Errorf("UserByID after OpenSession with a new hash = %q updated %v, %v; want the new hash at t0", got.PasswordHash, got.UpdatedAt, err)
	}
	// Without a new hash the stored one stays.
	l2 := newLogin(t, u.ID, "laptop")
	if _, err := openSessionOf(t, s, l2); err != nil {
		t.Fatalf("OpenSession(laptop) = %v", err)
	}
	if got, _ := s.UserByID(t.Context(), u.ID); got.PasswordHash != l.NewPasswordHash {
		t.Errorf("OpenSession without a hash changed the password hash")
	}
}

func testOpenSessionReplaces(t *testing.T, s store.Store) {
	u, other := newUser(t, s), newUser(t, s)
	old := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "phone" })
	oldTok := newToken(t, s, old)
	older := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "phone"; x.CreatedAt = at(-2 * time.Hour) })
	expired := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "phone"; x.ExpiresAt = at(-time.Second) })
	laptop := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "laptop" })
	othersPhone := newSession(t, s, other.ID, func(x *store.Session) { x.DeviceID = "phone" })

	l := newLogin(t, u.ID, "phone")
	replaced, err := openSessionOf(t, s, l)
	if err != nil || replaced != old.ID {
		t.Fatalf("OpenSession = %q, %v; want %q (the newest active session of the device)", replaced, err, old.ID)
	}
	if got := mustSession(t, s, old.ID); got.RevokedAt == nil || !got.RevokedAt.Equal(t0) || got.RevokeReason != "replaced" {
		t.Errorf("replaced session = revoked %v reason %q, want revoked at t0 for \"replaced\"", got.RevokedAt, got.RevokeReason)
	}
	if got := mustToken(t, s, oldTok.Hash); got.RevokedAt == nil || !got.RevokedAt.Equal(t0) {
		t.Errorf("replaced session's token revoked_at = %v, want t0", got.RevokedAt)
	}
	for _, id := range []string{older.ID, expired.ID, laptop.ID, othersPhone.ID} {
		if got := mustSession(t, s, id); got.RevokedAt != nil {
			t.Errorf("session %s revoked, want untouched", id)
		}
	}
	want := l.Replaced
	want.SessionID = old.ID
	checkSameList(t, "ListAudit(session.revoked)", auditOf(t, s, u.ID, "session.revoked"), []store.AuditEvent{want})
	checkSame(t, "SessionByID(new)", mustSession(t, s, l.Session.ID), l.Session)
}

// A login that cannot be written (its session id is taken) leaves nothing
// behind: the old session is not revoked, no token and no event appear.
func testOpenSessionAtomic(t *testing.T, s store.Store) {
	u := newUser(t, s)
	old := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "phone" })
	l := newLogin(t, u.ID, "phone")
	l.Session.ID = old.ID
	l.Token.SessionID = old.ID
	l.NewPasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdA$bmV3aGFzaA"
	if _, err := openSessionOf(t, s, l); err == nil {
		t.Fatal("OpenSession with a taken session id = nil, want an error")
	}
	if got := mustSession(t, s, old.ID); got.RevokedAt != nil {
		t.Errorf("failed OpenSession revoked the old session")
	}
	if _, err := s.RefreshTokenByHash(t.Context(), l.Token.Hash); err == nil {
		t.Errorf("failed OpenSession left its refresh token")
	}
	if got := auditOf(t, s, u.ID, ""); len(got) != 0 {
		t.Errorf("failed OpenSession left %d audit entries", len(got))
	}
	if got, _ := s.UserByID(t.Context(), u.ID); got.PasswordHash == l.NewPasswordHash {
		t.Errorf("failed OpenSession changed the password hash")
	}
}

// A disabled user's login writes nothing: no session, no token, no event,
// no new password hash, and the device's session is not replaced.
func testOpenSessionDisabled(t *testing.T, s store.Store) {
	u := newUser(t, s, func(x *store.User) { x.Status = store.StatusDisabled })
	old := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = "phone" })
	l := newLogin(t, u.ID, "phone")
	l.NewPasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdA$bmV3aGFzaA"
	if _, err := openSessionOf(t, s, l); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("OpenSession(disabled user) = %v, want ErrPrecondition", err)
	}
	checkNothingOpened(t, s, u.ID, l)
	if got := mustSession(t, s, old.ID); got.RevokedAt != nil {
		t.Errorf("OpenSession(disabled user) revoked the device's session")
	}
	if _, err := openSessionOf(t, s, newLogin(t, newID(t), "phone")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenSession(no such user) = %v, want ErrNotFound", err)
	}
}

// A login whose password was checked against a hash that has since been
// replaced (a password change or reset committed meanwhile) writes nothing;
// checked against the current hash, it opens.
func testOpenSessionPasswordChanged(t *testing.T, s store.Store) {
	u := newUser(t, s)
	l := newLogin(t, u.ID, "phone")
	l.CheckedHash = u.PasswordHash
	const changed = "$argon2id$v=19$m=19456,t=2,p=1$Y2hhbmdlZA$Y2hhbmdlZGhhc2g"
	if err := setPasswordHash(t, s, u.ID, changed, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := openSessionOf(t, s, l); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("OpenSession(checked against the old hash) = %v, want ErrPrecondition", err)
	}
	checkNothingOpened(t, s, u.ID, l)
	l.CheckedHash = changed
	if _, err := openSessionOf(t, s, l); err != nil {
		t.Fatalf("OpenSession(checked against the current hash) = %v, want nil", err)
	}
}

// A login that reaches the database while a disable is in flight (its
// transaction has changed the status and revoked the sessions, and has not
// committed) must not leave a live session behind: it waits for the
// disable and writes nothing, or, had it come first, it would have been
// revoked with the others.
func testOpenSessionRacesDisable(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	l := newLogin(t, u.ID, "phone")
	done := make(chan error, 1)
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		disabled := store.StatusDisabled
		if _, err := tx.Update(ctx, store.UserChange{Status: &disabled}, t0); err != nil {
			return err
		}
		if _, err := tx.RevokeSessions(ctx, "account_disabled", t0); err != nil {
			return err
		}
		go func() {
			_, err := openSessionOf(t, s, l)
			done <- err
		}()
		// The operation cannot finish while this transaction holds the
		// user (a row lock on PostgreSQL, the write lock on SQLite): it
		// must be found waiting, not finished.
		if err := waitBlocked(ctx, s, "OpenSession", done); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("disable = %v", err)
	}
	if err := <-done; !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("OpenSession racing the disable = %v, want ErrPrecondition", err)
	}
	checkNothingOpened(t, s, u.ID, l)
}

// A revocation of every session (logout everywhere, password change)
// while a login is uncommitted waits for it and revokes its session too:
// the login must not survive a revocation that started after it.
func testRevokeWaitsForLogin(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	l := newLogin(t, u.ID, "phone")
	done := make(chan error, 1)
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		if _, err := openSession(t, tx, l); err != nil {
			return err
		}
		go func() {
			_, err := revokeUserSessions(t, s, u.ID, "logout_all", t0)
			done <- err
		}()
		// The operation cannot finish while this transaction holds the
		// user (a row lock on PostgreSQL, the write lock on SQLite): it
		// must be found waiting, not finished.
		if err := waitBlocked(ctx, s, "RevokeUserSessions", done); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("login = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RevokeUserSessions = %v", err)
	}
	if got := mustSession(t, s, l.Session.ID); got.RevokedAt == nil {
		t.Error("the login's session survived the revocation")
	}
	if got := mustToken(t, s, l.Token.Hash); got.RevokedAt == nil {
		t.Error("the login's refresh token survived the revocation")
	}
}

// checkNothingOpened checks that login l left no trace for user userID.
func checkNothingOpened(t *testing.T, s store.Store, userID string, l login) {
	t.Helper()
	if _, err := s.SessionByID(t.Context(), l.Session.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionByID(refused login) = %v, want ErrNotFound", err)
	}
	if _, err := s.RefreshTokenByHash(t.Context(), l.Token.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RefreshTokenByHash(refused login) = %v, want ErrNotFound", err)
	}
	if got := auditOf(t, s, userID, ""); len(got) != 0 {
		t.Errorf("refused login left %d audit entries", len(got))
	}
	if got, _ := s.UserByID(t.Context(), userID); got.PasswordHash == l.NewPasswordHash {
		t.Errorf("refused login changed the password hash")
	}
}
