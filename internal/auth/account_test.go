package auth_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// mailedToken claims the queued mail of kind for email and opens its
// sealed token, as the mail worker does.
func (f *fixture) mailedToken(t *testing.T, kind, email string) string {
	t.Helper()
	f.svc.Wait()
	jobs, err := f.st.ClaimMail(context.Background(), f.clock.Now().Add(time.Hour), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var tok string
	for _, j := range jobs {
		if j.Kind == kind && j.To == email {
			plain, err := f.sealer.Open(j.SealedToken, auth.MailSealContext(j.ID))
			if err != nil {
				t.Fatalf("open sealed token of job %s: %v", j.ID, err)
			}
			tok = string(plain)
		}
	}
	if tok == "" {
		t.Fatalf("no %s mail queued for %s among %d jobs", kind, email, len(jobs))
	}
	return tok
}

// forgot asks for a reset mail as a request would: the work starts once the
// request's context ends.
func (f *fixture) forgot(email string) error {
	ctx, answered := context.WithCancel(context.Background())
	defer answered()
	return f.svc.ForgotPassword(ctx, email, auth.Meta{})
}

func TestPasswordReset(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		u := f.user(t, "reset@example.com")
		session := f.login(t, "reset@example.com", "laptop")

		if err := f.forgot("nobody@example.com"); err != nil {
			t.Fatalf("ForgotPassword(unknown) = %v, want nil", err)
		}
		if err := f.forgot("Reset@Example.com"); err != nil {
			t.Fatalf("ForgotPassword(known) = %v, want nil", err)
		}
		tok := f.mailedToken(t, store.PurposePasswordReset, "reset@example.com")

		reset := func(tok, newPassword string) error {
			_, err := f.svc.ResetPassword(ctx, tok, newPassword, auth.Meta{})
			return err
		}
		wantCode(t, "reset with a weak password", reset(tok, "short"), "validation_failed")
		wantCode(t, "reset with a garbage token", reset("garbage", "a brand new passphrase"), "invalid_reset_token")
		if email, err := f.svc.ResetPassword(ctx, tok, "a brand new passphrase", auth.Meta{}); err != nil || email != "reset@example.com" {
			t.Fatalf("ResetPassword = %q, %v, want the account's email reset@example.com, nil (a policy failure must not spend the token)", email, err)
		}
		wantCode(t, "second use of the token", reset(tok, "another new passphrase"), "invalid_reset_token")
		_, err := f.svc.Refresh(ctx, session.RefreshToken, auth.Meta{})
		wantCode(t, "refresh after reset", err, "refresh_token_revoked")
		_, err = f.svc.Login(ctx, auth.LoginInput{Email: "reset@example.com", Password: pw}, auth.Meta{})
		wantCode(t, "login with the old password", err, "invalid_credentials")
		if _, err := f.svc.Login(ctx, auth.LoginInput{Email: "reset@example.com", Password: "a brand new passphrase"}, auth.Meta{}); err != nil {
			t.Fatalf("login with the new password = %v", err)
		}
		me, _ := f.svc.Me(ctx, u.ID)
		if me.EmailVerifiedAt == nil {
			t.Error("email not verified after a reset, want verified")
		}

		// An expired token, and one replaced by a newer request.
		f.forgot("reset@example.com")
		old := f.mailedToken(t, store.PurposePasswordReset, "reset@example.com")
		f.forgot("reset@example.com")
		newer := f.mailedToken(t, store.PurposePasswordReset, "reset@example.com")
		wantCode(t, "reset with a replaced token", reset(old, "yet another passphrase"), "invalid_reset_token")
		f.clock.Advance(31 * time.Minute)
		wantCode(t, "reset with an expired token", reset(newer, "yet another passphrase"), "invalid_reset_token")
	})
}

func TestEmailVerification(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		u := f.user(t, "verify@example.com")
		tok := f.mailedToken(t, store.PurposeVerifyEmail, "verify@example.com")
		wantCode(t, "verify with a reset-shaped garbage token", f.svc.VerifyEmail(ctx, "x", auth.Meta{}), "invalid_verification_token")
		if err := f.svc.VerifyEmail(ctx, tok, auth.Meta{}); err != nil {
			t.Fatalf("VerifyEmail = %v", err)
		}
		if me, _ := f.svc.Me(ctx, u.ID); me.EmailVerifiedAt == nil {
			t.Error("email_verified false after verification")
		}
		wantCode(t, "second verification", f.svc.VerifyEmail(ctx, tok, auth.Meta{}), "invalid_verification_token")
		if err := f.svc.ResendVerification(ctx, u.ID, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		if jobs, _ := f.st.ClaimMail(ctx, f.clock.Now().Add(time.Hour), 100, time.Minute); len(jobs) != 0 {
			t.Errorf("resend for a verified address queued %d mails, want 0", len(jobs))
		}
	})
}

func TestResendVerificationIsRateLimited(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testdb.SQLite(t), 0)
	u := f.user(t, "resend@example.com")
	f.mailedToken(t, store.PurposeVerifyEmail, "resend@example.com") // the mail of register
	for range 3 {
		if err := f.svc.ResendVerification(ctx, u.ID, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if jobs, _ := f.st.ClaimMail(ctx, f.clock.Now().Add(time.Hour), 100, time.Minute); len(jobs) != 0 {
		t.Errorf("resend within a minute of the last mail queued %d mails, want 0", len(jobs))
	}
	f.clock.Advance(2 * time.Minute)
	f.svc.ResendVerification(ctx, u.ID, auth.Meta{})
	f.mailedToken(t, store.PurposeVerifyEmail, "resend@example.com")
}

// Resends at the same moment queue one mail between them: each checks the
// queue holding the user's row, so the others see the first one's mail.
func TestResendVerificationConcurrent(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		u := f.user(t, "burst@example.com")
		f.mailedToken(t, store.PurposeVerifyEmail, "burst@example.com") // the mail of register
		f.clock.Advance(2 * time.Minute)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- f.svc.ResendVerification(ctx, u.ID, auth.Meta{})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("ResendVerification = %v", err)
			}
		}
		jobs, err := f.st.ClaimMail(ctx, f.clock.Now().Add(time.Hour), 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resent := 0
		for _, j := range jobs { // the register mail's lease has lapsed: it is back
			if j.CreatedAt.Equal(f.clock.Now()) {
				resent++
			}
		}
		if resent != 1 {
			t.Fatalf("8 concurrent resends queued %d mails, want 1", resent)
		}
	})
}

func TestRequireVerifiedEmail(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testdb.SQLite(t), 0, func(c *auth.Config) { c.RequireVerifiedEmail = true })
	f.user(t, "strict@example.com")
	_, err := f.svc.Login(ctx, auth.LoginInput{Email: "strict@example.com", Password: "wrong password entirely"}, auth.Meta{})
	wantCode(t, "unverified login with a wrong password", err, "invalid_credentials")
	_, err = f.svc.Login(ctx, auth.LoginInput{Email: "strict@example.com", Password: pw}, auth.Meta{})
	wantCode(t, "unverified login", err, "email_not_verified")
	if err := f.svc.VerifyEmail(ctx, f.mailedToken(t, store.PurposeVerifyEmail, "strict@example.com"), auth.Meta{}); err != nil {
		t.Fatal(err)
	}
	f.login(t, "strict@example.com", "laptop")
}
