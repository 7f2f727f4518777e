package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var sessionTests = []subtest{
	{"CreateAndGet", testSessionCreateAndGet},
	{"ActiveSessionByDevice", testActiveSessionByDevice},
	{"ActiveSessions", testActiveSessions},
	{"RevokeSession", testRevokeSession},
	{"RevokeSessionNotFound", testRevokeSessionNotFound},
	{"RevokeUserSessions", testRevokeUserSessions},
	{"RevokeSessionsPast", testRevokeSessionsPast},
	{"RevokeSessionsPastMany", testRevokeSessionsPastMany},
	{"TouchSession", testTouchSession},
}

func testSessionCreateAndGet(t *testing.T, s store.Store) {
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	bare := newSession(t, s, u.ID, func(s *store.Session) { s.DeviceName, s.UserAgent, s.IP = "", "", "" })
	checkSame(t, "SessionByID("+sess.ID+")", mustSession(t, s, sess.ID), sess)
	checkSame(t, "SessionByID("+bare.ID+")", mustSession(t, s, bare.ID), bare)

	_, err := s.SessionByID(t.Context(), newID(t))
	wantErr(t, "SessionByID(unknown)", err, store.ErrNotFound)
}

func testActiveSessionByDevice(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other := newUser(t, s), newUser(t, s)
	dev := "device-" + newID(t)
	onDev := func(s *store.Session) { s.DeviceID = dev }

	revoked := newSession(t, s, u.ID, onDev)
	if _, err := revokeSession(t, s, revoked.ID, "logout", at(-time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v, want nil", err)
	}
	newSession(t, s, u.ID, onDev, func(s *store.Session) { s.ExpiresAt = at(-time.Second) })
	newSession(t, s, u.ID, onDev, func(s *store.Session) { s.ExpiresAt = t0 }) // expired at now
	otherSess := newSession(t, s, other.ID, onDev)

	_, err := s.ActiveSessionByDevice(ctx, u.ID, dev, t0)
	wantErr(t, "ActiveSessionByDevice(only revoked and expired)", err, store.ErrNotFound)

	active := newSession(t, s, u.ID, onDev)
	got, err := s.ActiveSessionByDevice(ctx, u.ID, dev, t0)
	wantErr(t, "ActiveSessionByDevice", err, nil)
	checkSame(t, "ActiveSessionByDevice(user, device)", got, active)

	got, err = s.ActiveSessionByDevice(ctx, other.ID, dev, t0)
	wantErr(t, "ActiveSessionByDevice(other user)", err, nil)
	checkSame(t, "ActiveSessionByDevice(other user, device)", got, otherSess)

	_, err = s.ActiveSessionByDevice(ctx, u.ID, "device-unknown", t0)
	wantErr(t, "ActiveSessionByDevice(unknown device)", err, store.ErrNotFound)
}

func testActiveSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other, lonely := newUser(t, s), newUser(t, s), newUser(t, s)
	created := func(d time.Duration) func(*store.Session) {
		return func(s *store.Session) { s.CreatedAt, s.LastUsedAt = at(d), at(d) }
	}
	// Inserted out of order so that insertion order cannot pass for newest first.
	mid := newSession(t, s, u.ID, created(-3*time.Hour))
	newest := newSession(t, s, u.ID, created(-time.Hour))
	oldest := newSession(t, s, u.ID, created(-5*time.Hour))
	revoked := newSession(t, s, u.ID, created(-2*time.Hour))
	if _, err := revokeSession(t, s, revoked.ID, "logout", at(-time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v, want nil", err)
	}
	newSession(t, s, u.ID, created(-30*time.Minute), func(s *store.Session) { s.ExpiresAt = t0 })
	newSession(t, s, other.ID, created(-10*time.Minute))

	got, err := s.ActiveSessions(ctx, u.ID, t0, 100)
	wantErr(t, "ActiveSessions", err, nil)
	checkSameList(t, "ActiveSessions(user)", got, []store.Session{newest, mid, oldest})
	got, err = s.ActiveSessions(ctx, u.ID, t0, 2)
	wantErr(t, "ActiveSessions(limit 2)", err, nil)
	checkSameList(t, "ActiveSessions(user, limit 2)", got, []store.Session{newest, mid})

	got, err = s.ActiveSessions(ctx, lonely.ID, t0, 100)
	wantErr(t, "ActiveSessions(no sessions)", err, nil)
	if len(got) != 0 {
		t.Errorf("ActiveSessions(no sessions) = %s, want []", show(got))
	}
}

func testRevokeSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	first := newToken(t, s, sess)
	next := childOf(t, first, at(-30*time.Minute))
	if _, err := s.RotateRefreshToken(ctx, store.RotateRequest{Hash: first.Hash, Next: next, Now: at(-30 * time.Minute)}); err != nil {
		t.Fatalf("RotateRefreshToken = %v, want nil", err)
	}
	neighbour := newSession(t, s, u.ID)
	neighbourTok := newToken(t, s, neighbour)
	before := mustSession(t, s, sess.ID)

	changed, err := revokeSession(t, s, sess.ID, "logout", t0)
	if !changed || err != nil {
		t.Fatalf("RevokeSession(%s) = %v, %v, want true, nil", sess.ID, changed, err)
	}
	want := before
	want.RevokedAt, want.RevokeReason = ptr(t0), "logout"
	checkSame(t, "SessionByID after RevokeSession", mustSession(t, s, sess.ID), want)
	for _, h := range []string{first.Hash, next.Hash} {
		if got := mustToken(t, s, h); got.RevokedAt == nil || !sameTime(*got.RevokedAt, t0) {
			t.Errorf("RefreshTokenByHash(%s).RevokedAt = %v, want %v", h, show(got.RevokedAt), t0)
		}
	}
	if got := mustToken(t, s, neighbourTok.Hash); got.RevokedAt != nil {
		t.Errorf("RefreshTokenByHash(other session).RevokedAt = %v, want nil", show(got.RevokedAt))
	}
	checkSame(t, "SessionByID(other session)", mustSession(t, s, neighbour.ID), neighbour)

	// Idempotent: a second revocation changes nothing, not even the reason or time.
	changed, err = revokeSession(t, s, sess.ID, "again", at(time.Minute))
	if changed || err != nil {
		t.Errorf("RevokeSession(%s) again = %v, %v, want false, nil", sess.ID, changed, err)
	}
	checkSame(t, "SessionByID after second RevokeSession", mustSession(t, s, sess.ID), want)
}

func testRevokeSessionNotFound(t *testing.T, s store.Store) {
	u := newUser(t, s)
	err := s.WithUser(t.Context(), u.ID, func(tx store.UserTx) error {
		changed, err := tx.RevokeSession(t.Context(), newID(t), "logout", t0)
		if changed {
			t.Errorf("RevokeSession(unknown) changed = true, want false")
		}
		return err
	})
	wantErr(t, "RevokeSession(unknown)", err, store.ErrNotFound)
}

func testRevokeUserSessions(t *testing.T, s store.Store) {
	u, other := newUser(t, s), newUser(t, s)
	active := newSession(t, s, u.ID)
	activeTok := newToken(t, s, active)
	// Expired but never revoked: still an unrevoked session.
	expired := newSession(t, s, u.ID, func(s *store.Session) { s.ExpiresAt = at(-time.Hour) })
	expiredTok := newToken(t, s, expired, func(r *store.RefreshToken) { r.ExpiresAt = at(-time.Hour) })
	revoked := newSession(t, s, u.ID)
	revokedTok := newToken(t, s, revoked)
	if _, err := revokeSession(t, s, revoked.ID, "earlier", at(-time.Minute)); err != nil {
		t.Fatalf("RevokeSession = %v, want nil", err)
	}
	revokedBefore, revokedTokBefore := mustSession(t, s, revoked.ID), mustToken(t, s, revokedTok.Hash)
	otherSess := newSession(t, s, other.ID)
	otherTok := newToken(t, s, otherSess)

	ids, err := revokeUserSessions(t, s, u.ID, "password.changed", t0)
	wantErr(t, "RevokeUserSessions", err, nil)
	slices.Sort(ids)
	want := []string{active.ID, expired.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("RevokeUserSessions(user) = %q, want %q", ids, want)
	}

	for _, sess := range []store.Session{active, expired} {
		w := sess
		w.RevokedAt, w.RevokeReason = ptr(t0), "password.changed"
		checkSame(t, "SessionByID after RevokeUserSessions", mustSession(t, s, sess.ID), w)
	}
	for _, tok := range []store.RefreshToken{activeTok, expiredTok} {
		w := tok
		w.RevokedAt = ptr(t0)
		checkSame(t, "RefreshTokenByHash after RevokeUserSessions", mustToken(t, s, tok.Hash), w)
	}
	checkSame(t, "SessionByID(already revoked)", mustSession(t, s, revoked.ID), revokedBefore)
	checkSame(t, "RefreshTokenByHash(already revoked)", mustToken(t, s, revokedTok.Hash), revokedTokBefore)
	checkSame(t, "SessionByID(other user)", mustSession(t, s, otherSess.ID), otherSess)
	checkSame(t, "RefreshTokenByHash(other user)", mustToken(t, s, otherTok.Hash), otherTok)

	ids, err = revokeUserSessions(t, s, u.ID, "again", at(time.Minute))
	if err != nil || len(ids) != 0 {
		t.Errorf("RevokeUserSessions(user) again = %q, %v, want [], nil", ids, err)
	}
}

func testTouchSession(t *testing.T, s store.Store) {
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	neighbour := newSession(t, s, u.ID)
	theirs := newToken(t, s, neighbour)
	now := at(time.Minute)
	wantErr(t, "TouchSession", touchSession(t, s, sess.ID, tok.Hash, now, "198.51.100.7", "agent/2.0"), nil)

	want := sess
	want.LastUsedAt, want.IP, want.UserAgent = now, "198.51.100.7", "agent/2.0"
	checkSame(t, "SessionByID after TouchSession", mustSession(t, s, sess.ID), want)
	checkSame(t, "SessionByID(other session)", mustSession(t, s, neighbour.ID), neighbour)

	// Only while the token is the session's live one: not with another
	// session's, not once it has expired, been rotated or revoked. A
	// refused touch changes nothing.
	later := at(2 * time.Minute)
	wantErr(t, "TouchSession with another session's token", touchSession(t, s, sess.ID, theirs.Hash, later, "", ""), store.ErrNotFound)
	wantErr(t, "TouchSession with an expired token", touchSession(t, s, sess.ID, tok.Hash, tok.ExpiresAt, "", ""), store.ErrNotFound)
	child := childOf(t, tok, later)
	if _, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: child, Now: later}); err != nil {
		t.Fatalf("RotateRefreshToken = %v", err)
	}
	wantErr(t, "TouchSession with a rotated token", touchSession(t, s, sess.ID, tok.Hash, later, "", ""), store.ErrNotFound)
	want = mustSession(t, s, sess.ID)
	if _, err := revokeSession(t, s, sess.ID, "logout", later); err != nil {
		t.Fatalf("RevokeSession = %v", err)
	}
	wantErr(t, "TouchSession of a revoked session", touchSession(t, s, sess.ID, child.Hash, later, "203.0.113.1", ""), store.ErrNotFound)
	if got := mustSession(t, s, sess.ID); got.LastUsedAt != want.LastUsedAt || got.IP != want.IP {
		t.Errorf("a refused TouchSession changed the session: %s, want last used %s from %s", show(got), want.LastUsedAt, want.IP)
	}
}

// Sessions past the most recently used ones are revoked with their
// tokens, least recently used first; revoked and expired sessions and
// other users' count for nothing.
func testRevokeSessionsPast(t *testing.T, s store.Store) {
	ctx := t.Context()
	u, other := newUser(t, s), newUser(t, s)
	used := func(created, last time.Duration) func(*store.Session) {
		return func(s *store.Session) { s.CreatedAt, s.LastUsedAt = at(created), at(last) }
	}
	// Created in one order, used in another: the order of use decides.
	busy := newSession(t, s, u.ID, used(-9*time.Hour, -time.Minute))
	recent := newSession(t, s, u.ID, used(-time.Hour, -time.Hour))
	idle := newSession(t, s, u.ID, used(-8*time.Hour, -7*time.Hour))
	idlest := newSession(t, s, u.ID, used(-10*time.Hour, -10*time.Hour))
	tokens := map[string]store.RefreshToken{}
	for _, x := range []store.Session{busy, recent, idle, idlest} {
		tokens[x.ID] = newToken(t, s, x)
	}
	revoked := newSession(t, s, u.ID, used(-20*time.Hour, -20*time.Hour))
	if _, err := revokeSession(t, s, revoked.ID, "logout", at(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	newSession(t, s, u.ID, used(-30*time.Hour, -30*time.Hour), func(s *store.Session) { s.ExpiresAt = t0 })
	otherSess := newSession(t, s, other.ID, used(-40*time.Hour, -40*time.Hour))

	revokePast := func(keep int) []string {
		t.Helper()
		var ids []string
		err := s.WithUser(ctx, u.ID, func(tx store.UserTx) (err error) {
			ids, err = tx.RevokeSessionsPast(ctx, keep, "session_limit", t0)
			return err
		})
		wantErr(t, "RevokeSessionsPast", err, nil)
		return ids
	}
	if got := revokePast(4); len(got) != 0 {
		t.Fatalf("RevokeSessionsPast(keep 4 of 4) = %v, want none", got)
	}
	if got, want := revokePast(2), []string{idlest.ID, idle.ID}; !slices.Equal(got, want) {
		t.Fatalf("RevokeSessionsPast(keep 2) = %v, want %v (least recently used first)", got, want)
	}
	for _, x := range []store.Session{idle, idlest} {
		got := mustSession(t, s, x.ID)
		if got.RevokedAt == nil || !got.RevokedAt.Equal(t0) || got.RevokeReason != "session_limit" {
			t.Errorf("session %s after RevokeSessionsPast: revoked %v, reason %q; want at now, session_limit", x.ID, got.RevokedAt, got.RevokeReason)
		}
		if tok, err := s.RefreshTokenByHash(ctx, tokens[x.ID].Hash); err != nil || tok.RevokedAt == nil {
			t.Errorf("the refresh token of revoked session %s: %+v, %v; want revoked", x.ID, tok, err)
		}
	}
	for _, x := range []store.Session{busy, recent, otherSess} {
		if got := mustSession(t, s, x.ID); got.RevokedAt != nil {
			t.Errorf("session %s was revoked, want it kept", x.ID)
		}
	}
	if tok, err := s.RefreshTokenByHash(ctx, tokens[busy.ID].Hash); err != nil || tok.RevokedAt != nil {
		t.Errorf("the refresh token of kept session %s: %+v, %v; want unrevoked", busy.ID, tok, err)
	}
	if got := mustSession(t, s, revoked.ID); got.RevokeReason != "logout" {
		t.Errorf("an already revoked session got reason %q, want logout kept", got.RevokeReason)
	}
	if got, want := revokePast(0), []string{recent.ID, busy.ID}; !slices.Equal(got, want) {
		t.Fatalf("RevokeSessionsPast(keep 0) = %v, want %v", got, want)
	}
}

// A user far past the limit (one that held sessions before it was
// lowered) loses them all in one call, however many statements the
// backend needs for them.
func testRevokeSessionsPastMany(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	const n, keep = 1203, 3
	var newest []string
	for i := range n {
		last := at(time.Duration(i-n) * time.Second)
		sess := newSession(t, s, u.ID, func(s *store.Session) { s.LastUsedAt = last })
		if i >= n-keep {
			newest = append(newest, sess.ID)
		}
	}
	var ids []string
	err := s.WithUser(ctx, u.ID, func(tx store.UserTx) (err error) {
		ids, err = tx.RevokeSessionsPast(ctx, keep, "session_limit", t0)
		return err
	})
	wantErr(t, "RevokeSessionsPast", err, nil)
	if len(ids) != n-keep {
		t.Fatalf("RevokeSessionsPast(keep %d of %d) revoked %d, want %d", keep, n, len(ids), n-keep)
	}
	left, err := s.ActiveSessions(ctx, u.ID, t0, n)
	wantErr(t, "ActiveSessions", err, nil)
	var got []string
	for _, x := range left {
		got = append(got, x.ID)
	}
	slices.Sort(got)
	slices.Sort(newest)
	if !slices.Equal(got, newest) {
		t.Fatalf("active after RevokeSessionsPast = %v, want the %d most recently used %v", got, keep, newest)
	}
}
