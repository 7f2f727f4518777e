package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var tokenTests = []subtest{
	{"CreateAndGet", testTokenCreateAndGet},
	{"Rotate", testRotate},
	{"RotateKeepsClientWhenEmpty", testRotateKeepsClientWhenEmpty},
	{"RotateTwice", testRotateTwice},
	{"RotateRevoked", testRotateRevoked},
	{"RotateExpired", testRotateExpired},
	{"RotateCapsAtTheSessionEnd", testRotateCapsAtSessionEnd},
	{"RotateUnknown", testRotateUnknown},
	{"RotateConcurrent", testRotateConcurrent},
	{"RotateReturnsOwnerAndAudits", testRotateReturnsOwnerAndAudits},
	{"RotateDisabledOwner", testRotateDisabledOwner},
	{"RotateRacesADisable", testRotateRacesDisable},
	{"RotateRacesALogout", testRotateRacesLogout},
	{"RotateRacesALoginOnTheDevice", testRotateRacesRelogin},
}

func testTokenCreateAndGet(t *testing.T, s store.Store) {
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	newToken(t, s, newSession(t, s, u.ID))
	checkSame(t, "RefreshTokenByHash("+tok.Hash+")", mustToken(t, s, tok.Hash), tok)

	_, err := s.RefreshTokenByHash(t.Context(), newHash(t))
	wantErr(t, "RefreshTokenByHash(unknown)", err, store.ErrNotFound)
}

// rotation sets up a user, a session and its first token.
func rotation(t *testing.T, s store.Store, mods ...func(*store.RefreshToken)) (store.Session, store.RefreshToken) {
	t.Helper()
	sess := newSession(t, s, newUser(t, s).ID)
	return sess, newToken(t, s, sess, mods...)
}

// checkUnchanged reports unless the token, the session and the would-be
// child stand as before a refused rotation.
func checkUnchanged(t *testing.T, s store.Store, sess store.Session, tok, child store.RefreshToken) {
	t.Helper()
	checkSame(t, "RefreshTokenByHash(refused token)", mustToken(t, s, tok.Hash), tok)
	checkSame(t, "SessionByID after refused rotation", mustSession(t, s, sess.ID), sess)
	_, err := s.RefreshTokenByHash(t.Context(), child.Hash)
	wantErr(t, "RefreshTokenByHash(child of refused rotation)", err, store.ErrNotFound)
}

func testRotate(t *testing.T, s store.Store) {
	sess, tok := rotation(t, s)
	neighbour := newToken(t, s, newSession(t, s, sess.UserID))
	child := childOf(t, tok, t0)

	rot, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0, IP: "203.0.113.9", UserAgent: "agent/2.0"})
	if err != nil {
		t.Fatalf("RotateRefreshToken(%s) = %v, want nil", tok.Hash, err)
	}
	checkSame(t, "RotateRefreshToken().Token", rot.Token, tok) // as it stood before the call
	if rot.Child != nil {
		t.Errorf("RotateRefreshToken().Child = %s, want nil", show(rot.Child))
	}

	wantTok := tok
	wantTok.RotatedAt = ptr(t0)
	checkSame(t, "RefreshTokenByHash(parent)", mustToken(t, s, tok.Hash), wantTok)
	checkSame(t, "RefreshTokenByHash(child)", mustToken(t, s, child.Hash), child)
	wantSess := sess
	wantSess.LastUsedAt, wantSess.ExpiresAt = t0, child.ExpiresAt
	wantSess.IP, wantSess.UserAgent = "203.0.113.9", "agent/2.0"
	checkSame(t, "SessionByID after rotation", mustSession(t, s, sess.ID), wantSess)
	checkSame(t, "RefreshTokenByHash(other session)", mustToken(t, s, neighbour.Hash), neighbour)

	// The child rotates in turn: a chain, not a one-off.
	grandchild := childOf(t, child, at(time.Minute))
	_, err = s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: child.Hash, Next: grandchild, Now: at(time.Minute)})
	wantErr(t, "RotateRefreshToken(child)", err, nil)
	checkSame(t, "RefreshTokenByHash(grandchild)", mustToken(t, s, grandchild.Hash), grandchild)
}

// testRotateCapsAtTheSessionEnd: a rotation never gives the new token or
// the session an expiry past the session's absolute end, and once that end
// has come the session's last token rotates no more.
func testRotateCapsAtSessionEnd(t *testing.T, s store.Store) {
	ctx := t.Context()
	end := at(2 * time.Hour)
	sess := newSession(t, s, newUser(t, s).ID, func(s *store.Session) { s.ExpiresAt, s.MaxExpiresAt = end, end })
	tok := newToken(t, s, sess, func(r *store.RefreshToken) { r.ExpiresAt = end })

	// Well before the end: the new token gets its full lifetime.
	short := childOf(t, tok, t0)
	short.ExpiresAt = at(time.Hour)
	rot, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: short, Now: t0})
	if err != nil {
		t.Fatalf("RotateRefreshToken(expiry before the end) = %v, want nil", err)
	}
	if !rot.NextExpiresAt.Equal(short.ExpiresAt) {
		t.Errorf("RotateRefreshToken(expiry before the end).NextExpiresAt = %v, want %v", rot.NextExpiresAt, short.ExpiresAt)
	}
	checkSame(t, "RefreshTokenByHash(uncapped child)", mustToken(t, s, short.Hash), short)

	// Past the end: capped, in the token, the session and the answer.
	long := childOf(t, short, at(time.Minute)) // 14 days
	rot, err = s.RotateRefreshToken(ctx, store.RotateRequest{Hash: short.Hash, Next: long, Now: at(time.Minute)})
	if err != nil {
		t.Fatalf("RotateRefreshToken(expiry past the end) = %v, want nil", err)
	}
	if !rot.NextExpiresAt.Equal(end) {
		t.Errorf("RotateRefreshToken(expiry past the end).NextExpiresAt = %v, want the session's end %v", rot.NextExpiresAt, end)
	}
	wantChild := long
	wantChild.ExpiresAt = end
	checkSame(t, "RefreshTokenByHash(capped child)", mustToken(t, s, long.Hash), wantChild)
	wantSess := sess
	wantSess.LastUsedAt, wantSess.ExpiresAt = at(time.Minute), end
	checkSame(t, "SessionByID after a capped rotation", mustSession(t, s, sess.ID), wantSess)

	// At the end: the token has expired with its session.
	after := childOf(t, long, end)
	_, err = s.RotateRefreshToken(ctx, store.RotateRequest{Hash: long.Hash, Next: after, Now: end})
	wantErr(t, "RotateRefreshToken(at the session's end)", err, store.ErrPrecondition)
	checkUnchanged(t, s, wantSess, wantChild, after)
}

func testRotateKeepsClientWhenEmpty(t *testing.T, s store.Store) {
	sess, tok := rotation(t, s)
	child := childOf(t, tok, t0)
	_, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0})
	wantErr(t, "RotateRefreshToken", err, nil)

	want := sess
	want.LastUsedAt, want.ExpiresAt = t0, child.ExpiresAt
	checkSame(t, "SessionByID after rotation without ip and user agent", mustSession(t, s, sess.ID), want)
}

func testRotateTwice(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, tok := rotation(t, s)
	first := childOf(t, tok, t0)
	if _, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: first, Now: t0}); err != nil {
		t.Fatalf("RotateRefreshToken = %v, want nil", err)
	}
	sess := mustSession(t, s, tok.SessionID)
	rotated := mustToken(t, s, tok.Hash)

	second := childOf(t, tok, at(time.Minute))
	rot, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: second, Now: at(time.Minute), IP: "203.0.113.9", UserAgent: "agent/3.0"})
	wantErr(t, "RotateRefreshToken(rotated token)", err, store.ErrPrecondition)
	want := tok
	want.RotatedAt = ptr(t0)
	checkSame(t, "RotateRefreshToken(rotated token).Token", rot.Token, want)
	if rot.Child == nil {
		t.Errorf("RotateRefreshToken(rotated token).Child = nil, want %s", show(first))
	} else {
		checkSame(t, "RotateRefreshToken(rotated token).Child", *rot.Child, first)
	}
	checkUnchanged(t, s, sess, rotated, second)
}

func testRotateRevoked(t *testing.T, s store.Store) {
	sess, tok := rotation(t, s)
	if _, err := revokeSession(t, s, sess.ID, "logout", at(-time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v, want nil", err)
	}
	sess, tok = mustSession(t, s, sess.ID), mustToken(t, s, tok.Hash)
	child := childOf(t, tok, t0)

	rot, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0, IP: "203.0.113.9", UserAgent: "agent/2.0"})
	wantErr(t, "RotateRefreshToken(revoked token)", err, store.ErrPrecondition)
	checkSame(t, "RotateRefreshToken(revoked token).Token", rot.Token, tok)
	if rot.Token.RevokedAt == nil {
		t.Errorf("RotateRefreshToken(revoked token).Token.RevokedAt = nil, want %v", at(-time.Minute))
	}
	if rot.Child != nil {
		t.Errorf("RotateRefreshToken(revoked token).Child = %s, want nil", show(rot.Child))
	}
	checkUnchanged(t, s, sess, tok, child)
}

func testRotateExpired(t *testing.T, s store.Store) {
	for _, tc := range []struct {
		name    string
		expires time.Time
	}{
		{"AtNow", t0},
		{"BeforeNow", at(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, tok := rotation(t, s, func(r *store.RefreshToken) { r.ExpiresAt = tc.expires })
			child := childOf(t, tok, t0)
			rot, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0})
			wantErr(t, "RotateRefreshToken(expired token)", err, store.ErrPrecondition)
			checkSame(t, "RotateRefreshToken(expired token).Token", rot.Token, tok)
			checkUnchanged(t, s, sess, tok, child)
		})
	}
}

func testRotateUnknown(t *testing.T, s store.Store) {
	_, tok := rotation(t, s)
	hash := newHash(t)
	child := childOf(t, tok, t0)
	child.ParentHash = hash
	_, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: hash, Next: child, Now: t0})
	wantErr(t, "RotateRefreshToken(unknown)", err, store.ErrNotFound)
	_, err = s.RefreshTokenByHash(t.Context(), child.Hash)
	wantErr(t, "RefreshTokenByHash(child of unknown)", err, store.ErrNotFound)
}

// testRotateConcurrent races n rotations of one token: the contract says
// exactly one wins and every other one is a clean ErrPrecondition (a busy
// or serialization error from the database must not leak).
func testRotateConcurrent(t *testing.T, s store.Store) {
	const n = 20
	ctx := t.Context()
	_, tok := rotation(t, s)
	children := make([]store.RefreshToken, n)
	for i := range children {
		children[i] = childOf(t, tok, t0)
	}
	rots := make([]store.Rotation, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			rots[i], errs[i] = s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: children[i], Now: t0})
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("RotateRefreshToken #%d and #%d = nil, want exactly one nil", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrPrecondition):
			t.Errorf("RotateRefreshToken #%d = %v, want nil or %v", i, err, store.ErrPrecondition)
		}
	}
	if winner < 0 {
		t.Fatalf("RotateRefreshToken: no rotation of %d succeeded, want exactly one", n)
	}
	for i, err := range errs {
		if !errors.Is(err, store.ErrPrecondition) {
			continue
		}
		if c := rots[i].Child; c == nil || c.Hash != children[winner].Hash {
			t.Errorf("RotateRefreshToken #%d (lost).Child = %s, want the winner's %s", i, show(c), children[winner].Hash)
		}
	}

	found := 0
	for i, c := range children {
		got, err := s.RefreshTokenByHash(ctx, c.Hash)
		switch {
		case err == nil:
			found++
			if i != winner {
				t.Errorf("RefreshTokenByHash(child #%d) found, but #%d won", i, winner)
			}
			checkSame(t, "RefreshTokenByHash(winning child)", got, c)
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("RefreshTokenByHash(child #%d) = %v, want nil or %v", i, err, store.ErrNotFound)
		}
	}
	if found != 1 {
		t.Errorf("children stored after %d concurrent rotations = %d, want 1", n, found)
	}
	if got := mustToken(t, s, tok.Hash); got.RotatedAt == nil || !sameTime(*got.RotatedAt, t0) {
		t.Errorf("RefreshTokenByHash(parent).RotatedAt = %s, want %v", show(got.RotatedAt), t0)
	}
}

func testRotateReturnsOwnerAndAudits(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s, func(u *store.User) { u.Role, u.TenantID = "admin", "tenant-1" })
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	ev := store.AuditEvent{ID: newID(t), Type: "refresh_token.used", OccurredAt: t0, IP: "203.0.113.9", RequestID: "req-1", Data: []byte(`{"k":"v"}`)}
	rot, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: childOf(t, tok, t0), Now: t0, Event: &ev})
	if err != nil {
		t.Fatalf("RotateRefreshToken with an event = %v, want nil", err)
	}
	if rot.User.ID != u.ID || rot.User.Role != "admin" || rot.User.TenantID != "tenant-1" || rot.User.Status != store.StatusEnabled {
		t.Errorf("RotateRefreshToken().User = %+v, want the owner %s (admin, tenant-1, enabled)", rot.User, u.ID)
	}
	if rot.User.PasswordHash != "" {
		t.Errorf("RotateRefreshToken().User.PasswordHash = %q, want it left empty", rot.User.PasswordHash)
	}
	got, err := s.ListAudit(ctx, store.AuditFilter{Type: "refresh_token.used"})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListAudit(refresh_token.used) = %d events, %v; want 1", len(got), err)
	}
	want := ev
	want.UserID, want.SessionID = u.ID, sess.ID // filled in from the token
	checkSame(t, "audit event of the rotation", got[0], want)

	// A refused rotation records nothing.
	again := ev
	again.ID = newID(t)
	_, err = s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: childOf(t, tok, t0), Now: t0, Event: &again})
	wantErr(t, "RotateRefreshToken(rotated token) with an event", err, store.ErrPrecondition)
	if got, _ := s.ListAudit(ctx, store.AuditFilter{Type: "refresh_token.used"}); len(got) != 1 {
		t.Errorf("ListAudit after a refused rotation = %d events, want still 1", len(got))
	}
}

func testRotateDisabledOwner(t *testing.T, s store.Store) {
	u := newUser(t, s, func(u *store.User) { u.Status = store.StatusDisabled })
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	child := childOf(t, tok, t0)
	ev := store.AuditEvent{ID: newID(t), Type: "refresh_token.used", OccurredAt: t0}
	rot, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0, Event: &ev})
	wantErr(t, "RotateRefreshToken(token of a disabled user)", err, store.ErrPrecondition)
	checkSame(t, "RotateRefreshToken(token of a disabled user).Token", rot.Token, tok)
	checkUnchanged(t, s, sess, tok, child)
	if got, _ := s.ListAudit(t.Context(), store.AuditFilter{Type: "refresh_token.used"}); len(got) != 0 {
		t.Errorf("ListAudit after a refused rotation = %d events, want 0", len(got))
	}
}

// A rotation that reaches the database while a disable is in flight (its
// transaction has changed the status and not yet revoked the sessions)
// waits for it and rotates nothing; the disable then commits, without a
// deadlock between the two (each would hold a row the other needs if the
// rotation took the token before the user).
func testRotateRacesDisable(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	child := childOf(t, tok, t0)
	done := make(chan error, 1)
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		disabled := store.StatusDisabled
		if _, err := tx.Update(ctx, store.UserChange{Status: &disabled}, t0); err != nil {
			return err
		}
		go func() {
			_, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0})
			done <- err
		}()
		// The operation cannot finish while this transaction holds the
		// user (a row lock on PostgreSQL, the write lock on SQLite): it
		// must be found waiting, not finished.
		if err := waitBlocked(ctx, s, "RotateRefreshToken", done); err != nil {
			return err
		}
		_, err := tx.RevokeSessions(ctx, "account_disabled", t0)
		return err
	})
	if err != nil {
		t.Fatalf("disable = %v, want nil", err)
	}
	wantErr(t, "RotateRefreshToken racing the disable", <-done, store.ErrPrecondition)
	if _, err := s.RefreshTokenByHash(ctx, child.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RefreshTokenByHash(child) = %v, want ErrNotFound: the rotation wrote a token", err)
	}
}

// A session refreshed and logged out at the same moment (a browser tab
// refreshing while another logs out): both complete without error, in
// either order, and no live token of the session remains. Rotation and
// revocation lock the user, the session and the token in one order, so
// they never wait for each other in a cycle.
func testRotateRacesLogout(t *testing.T, s store.Store) {
	raceRotation(t, s, "RevokeSession", func(sess store.Session) error {
		_, err := revokeSession(t, s, sess.ID, "logout", t0)
		return err
	})
}

// A device's session refreshed while the device logs in again (which
// replaces that session): both complete without error, and no live token
// of the replaced session remains.
func testRotateRacesRelogin(t *testing.T, s store.Store) {
	raceRotation(t, s, "OpenSession", func(sess store.Session) error {
		_, err := openSessionOf(t, s, newLogin(t, sess.UserID, sess.DeviceID))
		return err
	})
}

// raceRotation runs, 20 times over, a rotation of a fresh session's token
// at the same moment as end, which must end that session: both must
// succeed (the rotation may find the token revoked already), and the token
// the rotation wrote, if it did, must be revoked.
func raceRotation(t *testing.T, s store.Store, name string, end func(store.Session) error) {
	t.Helper()
	ctx := t.Context()
	u := newUser(t, s)
	for i := range 20 {
		sess := newSession(t, s, u.ID, func(x *store.Session) { x.DeviceID = fmt.Sprint("phone-", i) })
		tok := newToken(t, s, sess)
		child := childOf(t, tok, t0)
		var wg sync.WaitGroup
		var rotErr, endErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, rotErr = s.RotateRefreshToken(ctx, store.RotateRequest{Hash: tok.Hash, Next: child, Now: t0})
		}()
		go func() {
			defer wg.Done()
			endErr = end(sess)
		}()
		wg.Wait()
		if rotErr != nil && !errors.Is(rotErr, store.ErrPrecondition) {
			t.Fatalf("round %d: RotateRefreshToken = %v, want nil or ErrPrecondition", i, rotErr)
		}
		if endErr != nil {
			t.Fatalf("round %d: %s = %v, want nil", i, name, endErr)
		}
		if got, err := s.RefreshTokenByHash(ctx, child.Hash); err == nil && got.RevokedAt == nil {
			t.Fatalf("round %d: the token rotated in beside %s is live", i, name)
		}
	}
}
