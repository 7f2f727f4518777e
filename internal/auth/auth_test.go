package auth_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/internal/token"
)

type fixture struct {
	svc    *auth.Service
	st     store.Store
	clock  *clocktest.Clock
	sealer *keys.Sealer
	kek    []byte // the key sealer seals with
	deps   auth.Deps
	cfg    auth.Config
}

// over is the fixture's service over another store (a wrapper of its own).
func (f *fixture) over(st store.Store) *auth.Service {
	d := f.deps
	d.Store = st
	return auth.New(d, f.cfg)
}

var cheap = password.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func newFixture(t testing.TB, dbURL string, leeway time.Duration, mods ...func(*auth.Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, dbURL, leeway, cheap, mods...)
}

func newFixtureWith(t testing.TB, dbURL string, leeway time.Duration, params password.Params, mods ...func(*auth.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	st := testdb.Store(t, dbURL)
	c := clocktest.New(time.Now().UTC().Truncate(time.Second))
	kek := make([]byte, keys.KEKSize)
	if _, err := io.ReadFull(rand.Reader, kek); err != nil {
		t.Fatal(err)
	}
	sealer, err := keys.NewSealer(kek, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	km := keys.NewManager(st, sealer, keys.Options{AccessTokenTTL: 15 * time.Minute, ReloadInterval: time.Hour}, c.Now, rand.Reader)
	if err := km.EnsureKey(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := auth.Config{RefreshTokenTTL: 24 * time.Hour, RefreshReuseLeeway: leeway}
	for _, mod := range mods {
		mod(&cfg)
	}
	deps := auth.Deps{
		Store: st, Hasher: password.NewHasher(params, 0, rand.Reader), Policy: password.DefaultPolicy(),
		Minter:          token.NewMinter(km, "http://issuer.test", "api", 15*time.Minute, c.Now, rand.Reader),
		SuccessorSecret: sealer.DeriveSecret("refresh-successor"),
		Logger:          slog.New(slog.DiscardHandler), Now: c.Now, Rand: rand.Reader, Sealer: sealer,
		Keys: km,
	}
	return &fixture{svc: auth.New(deps, cfg), st: st, clock: c, sealer: sealer, kek: kek, deps: deps, cfg: cfg}
}

func forEachDB(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, testdb.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, testdb.Postgres(t)) })
}

const pw = "correct horse battery staple"

func (f *fixture) user(t testing.TB, email string) auth.Account {
	t.Helper()
	u, err := f.svc.Register(context.Background(), auth.RegisterInput{Email: email, Password: pw}, auth.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (f *fixture) login(t testing.TB, email, device string) auth.TokenPair {
	t.Helper()
	p, err := f.svc.Login(context.Background(), auth.LoginInput{Email: email, Password: pw, DeviceID: device}, auth.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if !apperr.Is(err, code) {
		t.Fatalf("%s: err = %v, want code %s", what, err, code)
	}
}

func TestReuseLeeway(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 10*time.Second)
		f.user(t, "leeway@example.com")
		a := f.login(t, "leeway@example.com", "d1")
		other := f.login(t, "leeway@example.com", "d2")

		b, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		again, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
		if err != nil {
			t.Fatalf("Refresh(parent within leeway) = %v, want the successor again", err)
		}
		if again.RefreshToken != b.RefreshToken {
			t.Error("Refresh(parent within leeway) returned a different refresh token than the first rotation")
		}
		if again.AccessToken == "" || again.AccessToken == b.AccessToken {
			t.Error("Refresh(parent within leeway) did not mint a new access token")
		}
		// The replayed successor is still the live token of the session.
		c, err := f.svc.Refresh(ctx, b.RefreshToken, auth.Meta{})
		if err != nil {
			t.Fatalf("Refresh(successor) = %v", err)
		}
		// Now a is no longer the latest rotated token: presenting it is theft.
		_, err = f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
		wantCode(t, "Refresh(grandparent)", err, "refresh_token_revoked")
		for _, tok := range []string{c.RefreshToken, other.RefreshToken} {
			_, err = f.svc.Refresh(ctx, tok, auth.Meta{})
			wantCode(t, "Refresh(after theft)", err, "refresh_token_revoked")
		}
		evs, err := f.st.ListAudit(ctx, store.AuditFilter{Type: auth.EventRefreshTokenUsed, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		leewayEntries := 0
		for _, e := range evs {
			if string(e.Data) != "{}" {
				leewayEntries++
			}
		}
		if leewayEntries != 1 {
			t.Errorf("refresh_token.used entries recording the leeway = %d, want 1", leewayEntries)
		}
	})
}

// A replay within the leeway that waited for the user behind a revocation
// of its session finds the session revoked: it read the token before the
// lock, and used to answer 200 with a fresh access token for the revoked
// session. Each revocation that queues there is tried.
func TestReplayQueuedBehindARevocation(t *testing.T) {
	for name, revoke := range map[string]func(f *fixture, u auth.Account, p auth.TokenPair) error{
		"logout": func(f *fixture, _ auth.Account, p auth.TokenPair) error {
			return f.svc.Logout(context.Background(), p.RefreshToken, auth.Meta{})
		},
		"logout all": func(f *fixture, u auth.Account, p auth.TokenPair) error {
			return f.svc.LogoutAll(context.Background(), u.ID, p.SessionID, auth.Meta{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			dbURL := testdb.Postgres(t)
			f := newFixture(t, dbURL, 10*time.Second)
			ctx := context.Background()
			u := f.user(t, "queued@example.com")
			a := f.login(t, "queued@example.com", "")
			b, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			// FOR SHARE holds back every WithUser (FOR UPDATE), not the
			// rotation's claim (FOR KEY SHARE): the revocation queues
			// first, then the replay, which has read a on the way.
			release := testdb.Hold(t, dbURL, "SELECT 1 FROM users WHERE id = $1 FOR SHARE", u.ID)
			revoked := make(chan error, 1)
			go func() { revoked <- revoke(f, u, b) }()
			testdb.WaitLockWaiters(t, f.st.(testdb.LockWaiting), 1)
			replayed := make(chan error, 1)
			go func() {
				p, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
				if err == nil && p.AccessToken != "" {
					err = errors.New("an access token for the revoked session")
				}
				replayed <- err
			}()
			testdb.WaitLockWaiters(t, f.st.(testdb.LockWaiting), 2)
			release()
			if err := <-revoked; err != nil {
				t.Fatalf("%s = %v", name, err)
			}
			wantCode(t, "Refresh(parent within leeway, queued behind "+name+")", <-replayed, "refresh_token_revoked")
		})
	}
}

// A revocation that waited for the user's lock takes effect, and is dated,
// when it got the lock: its feed entry lasts access-token TTL + skew from
// then, so a token a refresh minted while it waited is still covered.
func TestRevocationIsDatedWhenItTakesEffect(t *testing.T) {
	dbURL := testdb.Postgres(t)
	f := newFixture(t, dbURL, 0)
	ctx := context.Background()
	u := f.user(t, "dated@example.com")
	a := f.login(t, "dated@example.com", "")
	release := testdb.Hold(t, dbURL, "SELECT 1 FROM users WHERE id = $1 FOR SHARE", u.ID)
	done := make(chan error, 1)
	go func() { done <- f.svc.Logout(ctx, a.RefreshToken, auth.Meta{}) }()
	testdb.WaitLockWaiters(t, f.st.(testdb.LockWaiting), 1)
	f.clock.Advance(time.Minute) // the wait
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sess, err := f.st.SessionByID(ctx, a.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.clock.Now().UTC(); sess.RevokedAt == nil || !sess.RevokedAt.Equal(want) {
		t.Fatalf("session revoked at %v after waiting for the lock, want %v, when the logout got it", sess.RevokedAt, want)
	}
}

func TestReuseAfterLeewayIsTheft(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 10*time.Second)
	ctx := context.Background()
	f.user(t, "late@example.com")
	a := f.login(t, "late@example.com", "")
	if _, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(11 * time.Second)
	_, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh(parent after leeway)", err, "refresh_token_revoked")
	evs, err := f.st.ListAudit(ctx, store.AuditFilter{Type: auth.EventRefreshTokenReuse, Limit: 10})
	if err != nil || len(evs) != 1 {
		t.Fatalf("refresh_token.reused entries = %d (%v), want 1", len(evs), err)
	}
}

func TestStrictReuse(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	f.user(t, "strict@example.com")
	a := f.login(t, "strict@example.com", "")
	b, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh(rotated, no leeway)", err, "refresh_token_revoked")
	_, err = f.svc.Refresh(ctx, b.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh(successor after theft)", err, "refresh_token_revoked")
}

func TestRefreshExpired(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	f.user(t, "exp@example.com")
	a := f.login(t, "exp@example.com", "")
	f.clock.Advance(24*time.Hour + time.Second)
	_, err := f.svc.Refresh(ctx, a.RefreshToken, auth.Meta{})
	wantCode(t, "Refresh(expired)", err, "refresh_token_expired")
	_, err = f.svc.Refresh(ctx, "AAAA", auth.Meta{})
	wantCode(t, "Refresh(malformed)", err, "refresh_token_revoked")
}

func TestLoginFailures(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	u := f.user(t, "Mixed.Case@Example.com")
	tests := []struct {
		name, email, password, code, reason string
	}{
		{"unknown email", "nobody@example.com", pw, "invalid_credentials", "unknown_email"},
		{"wrong password", "mixed.case@example.com", "wrong password!!", "invalid_credentials", "wrong_password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Login(ctx, auth.LoginInput{Email: tt.email, Password: tt.password}, auth.Meta{})
			wantCode(t, "Login", err, tt.code)
		})
	}
	// Email lookup is case-insensitive.
	f.login(t, "MIXED.CASE@example.COM", "")
	evs, err := f.st.ListAudit(ctx, store.AuditFilter{Type: auth.EventLoginFailed, Limit: 10})
	if err != nil || len(evs) != 2 {
		t.Fatalf("login.failed entries = %d (%v), want 2", len(evs), err)
	}
	if evs[0].UserID != u.ID {
		t.Errorf("newest login.failed user = %q, want %q", evs[0].UserID, u.ID)
	}
}

// TestLoginInWidestSpellings: the longest valid email typed full-width
// still names its account, and a password in its widest spelling still
// matches; input longer than any valid spelling is not normalized (its
// NFKC form costs tens of ms) and is refused as credentials like any other.
func TestLoginInWidestSpellings(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	email := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com" // 254 bytes, the most allowed
	const hangul = "각각각각각각 correct horse battery"
	if _, err := f.svc.Register(ctx, auth.RegisterInput{Email: email, Password: hangul}, auth.Meta{}); err != nil {
		t.Fatal(err)
	}
	wide := strings.Map(func(r rune) rune { return r - '!' + '！' }, email) // full-width: 3 bytes a character
	jamo := strings.ReplaceAll(hangul, "각", "각")
	if _, err := f.svc.Login(ctx, auth.LoginInput{Email: wide, Password: jamo}, auth.Meta{}); err != nil {
		t.Fatalf("login with the email full-width (%d bytes) and the password as jamo = %v, want in", len(wide), err)
	}
	hostile := strings.Repeat("ﷺ", 21000) // 63 KB, eighteen characters each in NFKC
	for _, in := range []auth.LoginInput{{Email: hostile, Password: pw}, {Email: email, Password: hostile}} {
		_, err := f.svc.Login(ctx, in, auth.Meta{})
		wantCode(t, "Login with 63 KB of U+FDFA", err, "invalid_credentials")
	}
	if got := auth.NormalizeEmail(hostile); got != hostile {
		t.Errorf("NormalizeEmail of %d bytes changed it; want it back as it is", len(hostile))
	}
}

func TestBcryptUpgradedOnLogin(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	legacy, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now()
	u := store.User{ID: "legacy-1", Email: "legacy@example.com", EmailNormalized: "legacy@example.com",
		PasswordHash: string(legacy), Role: "user", Status: store.StatusEnabled, CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	f.login(t, "legacy@example.com", "")
	got, err := f.st.UserByID(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.PasswordHash == string(legacy) || len(got.PasswordHash) < 10 || got.PasswordHash[:10] != "$argon2id$" {
		t.Errorf("hash after login starts %q, want an argon2id upgrade", got.PasswordHash[:10])
	}
	f.login(t, "legacy@example.com", "") // the upgraded hash verifies
}

func TestDisabledAccount(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	now := f.clock.Now()
	hash, err := password.NewHasher(cheap, 1, rand.Reader).Hash(ctx, pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.CreateUser(ctx, store.User{ID: "off-1", Email: "off@example.com", EmailNormalized: "off@example.com",
		PasswordHash: hash, Role: "user", Status: store.StatusDisabled, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Login(ctx, auth.LoginInput{Email: "off@example.com", Password: "not the password"}, auth.Meta{})
	wantCode(t, "Login(disabled, wrong password)", err, "invalid_credentials")
	_, err = f.svc.Login(ctx, auth.LoginInput{Email: "off@example.com", Password: pw}, auth.Meta{})
	wantCode(t, "Login(disabled, right password)", err, "account_disabled")
}

func TestRegisterValidation(t *testing.T) {
	f := newFixture(t, testdb.SQLite(t), 0)
	ctx := context.Background()
	tests := []struct {
		name   string
		in     auth.RegisterInput
		fields []string
	}{
		{"empty", auth.RegisterInput{}, []string{"email", "password"}},
		{"bad email and short password", auth.RegisterInput{Email: "x", Password: "short"}, []string{"email", "password"}},
		{"display name form refused", auth.RegisterInput{Email: "Bob <bob@example.com>", Password: pw}, []string{"email"}},
		{"password equals email", auth.RegisterInput{Email: "longaddress1@example.com", Password: "longaddress1@example.com"}, []string{"password"}},
		{"control character in name", auth.RegisterInput{Email: "n@example.com", Password: pw, Name: "a\x00b"}, []string{"name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Register(ctx, tt.in, auth.Meta{})
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != "validation_failed" || e.Kind != apperr.KindInvalid {
				t.Fatalf("Register(%+v) = %v, want validation_failed", tt.in, err)
			}
			got := map[string]bool{}
			for _, fe := range e.Fields {
				got[fe.Field] = true
			}
			for _, want := range tt.fields {
				if !got[want] {
					t.Errorf("Register(%+v) fields = %+v, want one for %q", tt.in, e.Fields, want)
				}
			}
		})
	}
}

// meanwhile is the real store, with change run just before a transaction
// on a user begins: as if it had committed while the caller was checking or
// hashing a password.
type meanwhile struct {
	store.Store
	change func()
}

func (m meanwhile) WithUser(ctx context.Context, userID string, fn func(store.UserTx) error) error {
	m.change()
	return m.Store.WithUser(ctx, userID, fn)
}

// A login whose password check overlaps a password change or a disable
// opens no session: the checked password is no longer the account's (401),
// or the account is disabled (403).
func TestLoginOverlappingAnAccountChange(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		for _, tc := range []struct {
			email, code string
			change      func(u auth.Account) error
		}{
			{"changed@example.com", "invalid_credentials", func(u auth.Account) error {
				return f.st.WithUser(ctx, u.ID, func(tx store.UserTx) error {
					return tx.SetPasswordHash(ctx, "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$bmV3aGFzaG5ld2hhc2g", f.clock.Now())
				})
			}},
			{"disabled@example.com", "account_disabled", func(u auth.Account) error {
				disabled := store.StatusDisabled
				return f.st.WithUser(ctx, u.ID, func(tx store.UserTx) error {
					_, err := tx.Update(ctx, store.UserChange{Status: &disabled}, f.clock.Now())
					return err
				})
			}},
		} {
			u := f.user(t, tc.email)
			svc := f.over(meanwhile{Store: f.st, change: func() {
				if err := tc.change(u); err != nil {
					t.Fatal(err)
				}
			}})
			_, err := svc.Login(ctx, auth.LoginInput{Email: tc.email, Password: pw, DeviceID: "laptop"}, auth.Meta{})
			wantCode(t, "login overlapping the change of "+tc.email, err, tc.code)
			page, err := f.st.ListSessions(ctx, store.SessionFilter{UserID: u.ID, ActiveAt: f.clock.Now(), Limit: 10})
			if err != nil || len(page) != 0 {
				t.Errorf("%s: %d sessions after the refused login (%v), want none", tc.email, len(page), err)
			}
		}
	})
}

// Two password changes checked against the same current password: the one
// that commits second finds the password it checked replaced and changes
// nothing (403 current_password_incorrect), instead of overruling the first.
func TestChangePasswordOverlappingAnotherChange(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		u := f.user(t, "twice@example.com")
		const first, second = "the first new passphrase", "the second new passphrase"
		svc := f.over(meanwhile{Store: f.st, change: func() {
			if err := f.svc.ChangePassword(ctx, u.ID, "", auth.ChangePasswordInput{Current: pw, New: first}, auth.Meta{}); err != nil {
				t.Fatalf("first change = %v", err)
			}
		}})
		err := svc.ChangePassword(ctx, u.ID, "", auth.ChangePasswordInput{Current: pw, New: second}, auth.Meta{})
		wantCode(t, "the overlapping second change", err, "current_password_incorrect")
		if _, err := f.svc.Login(ctx, auth.LoginInput{Email: "twice@example.com", Password: first}, auth.Meta{}); err != nil {
			t.Errorf("login with the first change's password = %v, want it to be the password", err)
		}
	})
}
