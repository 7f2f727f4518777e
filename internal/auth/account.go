package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/token"
)

// Events of the password and email flows.
const (
	EventPasswordResetRequested = "password.reset_requested"
	EventPasswordReset          = "password.reset"
	EventEmailVerified          = "email.verified"
)

func errInvalidResetToken() error {
	return apperr.New(apperr.KindInvalid, "invalid_reset_token", "The password-reset link is invalid, used or expired.")
}

func errInvalidVerificationToken() error {
	return apperr.New(apperr.KindInvalid, "invalid_verification_token", "The verification link is invalid, used or expired.")
}

// linkOutbox queues a mail with a link in a transaction: store.Queries, or
// the store.UserTx of the mail's recipient.
type linkOutbox interface {
	outbox
	CreateOneTimeToken(ctx context.Context, t store.OneTimeToken) error
}

// queueLink creates a one-time token of purpose for u and queues the mail
// that carries it, in q's transaction. The token leaves this function only
// sealed, bound to the mail's id.
func (s *Service) queueLink(ctx context.Context, q linkOutbox, u store.User, purpose string, ttl time.Duration, now time.Time) error {
	tok, err := token.NewOpaque(s.rand)
	if err != nil {
		return err
	}
	if err := q.CreateOneTimeToken(ctx, store.OneTimeToken{
		Hash: token.Hash(tok), UserID: u.ID, Purpose: purpose, CreatedAt: now, ExpiresAt: now.Add(ttl),
	}); err != nil {
		return err
	}
	id := s.newID()
	sealed, err := s.sealer.Seal([]byte(tok), MailSealContext(id))
	if err != nil {
		return err
	}
	return q.EnqueueMail(ctx, store.MailJob{
		ID: id, Kind: purpose, UserID: u.ID, To: u.Email, Name: u.Name, SealedToken: sealed,
		CreatedAt: now, NextAttemptAt: now,
	})
}

// MailSealContext is what a mail's token is sealed to: its job id.
func MailSealContext(jobID string) string { return "mail-token:" + jobID }

// background runs the work of requests whose answer must not depend on it
// (forgot-password), bounded so a flood cannot start unbounded goroutines.
type background struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

// Wait blocks until background work has finished (for shutdown and tests).
func (s *Service) Wait() { s.bg.wg.Wait() }

// afterAnswer is how long background work waits after its request was
// answered. Started at once, the work's CPU burst (a transaction, then the
// mail worker) lands while the answer is still on its way to the client;
// on a busy host that showed: known addresses at forgot-password answered
// measurably slower than unknown ones (BenchmarkForgotPasswordLatency).
const afterAnswer = 10 * time.Millisecond

// inBackground runs fn once ctx is done (for a request, when its handler
// has returned, its answer written) and afterAnswer has passed. Callers
// outside a request cancel ctx to start fn.
func (s *Service) inBackground(ctx context.Context, fn func(ctx context.Context)) {
	// Waiting for a slot happens before anything depends on the request's
	// data, so it costs every request the same.
	select {
	case s.bg.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	s.bg.wg.Add(1)
	go func() {
		defer func() { <-s.bg.slots; s.bg.wg.Done() }()
		<-ctx.Done()
		time.Sleep(afterAnswer)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		fn(ctx)
	}()
}

// ForgotPassword queues a password-reset mail when email belongs to an
// enabled account. The caller's answer is the same whatever the email: the
// lookup and the queueing start only once ctx is done (the request has been
// answered), so not even the time taken tells whether the address is
// registered.
func (s *Service) ForgotPassword(ctx context.Context, email string, m Meta) error {
	if email == "" {
		e := apperr.New(apperr.KindMalformed, "malformed_request", "email is required.")
		e.Fields = []apperr.FieldError{{Field: "email", Code: "required", Message: "This field is required."}}
		return e
	}
	norm := NormalizeEmail(email)
	s.inBackground(ctx, func(ctx context.Context) {
		if err := s.forgot(ctx, norm, m); err != nil {
			s.log.ErrorContext(ctx, "forgot password", "err", err)
		}
	})
	return nil
}

func (s *Service) forgot(ctx context.Context, norm string, m Meta) error {
	u, err := s.st.UserByEmail(ctx, norm)
	known := err == nil && u.Status == store.StatusEnabled
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	now := s.clock()
	err = s.st.InTx(ctx, func(q store.Queries) error {
		if !known {
			// Recorded too: a run of these is what credential stuffing or
			// an enumeration attempt looks like.
			return q.AppendAudit(ctx, s.event(EventPasswordResetRequested, now, m, "", "",
				map[string]any{"email": truncate(norm, maxEmailLen), "outcome": "no_enabled_account"}))
		}
		if err := s.queueLink(ctx, q, u, store.PurposePasswordReset, s.cfg.ResetTokenTTL, now); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.event(EventPasswordResetRequested, now, m, u.ID, "", map[string]any{"outcome": "mail_queued"}))
	})
	if err == nil && known {
		s.mailQueued()
	}
	return err
}

// ResetPassword sets a new password with a reset token: one use, before it
// expires. It revokes every session of the user, marks the email
// verified (the user proved control of it) and, in the same transaction,
// queues a mail telling the owner of the reset (when, from which client).
// It returns the account's email, so that the caller can clear what it
// keeps per email (the login rate limits).
func (s *Service) ResetPassword(ctx context.Context, tok, newPassword string, m Meta) (string, error) {
	if !token.WellFormed(tok) {
		return "", errInvalidResetToken()
	}
	hash := token.Hash(tok)
	now := s.clock()
	ot, err := s.st.OneTimeTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || err == nil && (ot.Purpose != store.PurposePasswordReset || ot.UsedAt != nil || !now.Before(ot.ExpiresAt)) {
		return "", errInvalidResetToken()
	}
	if err != nil {
		return "", apperr.Internal(err)
	}
	u, err := s.st.UserByID(ctx, ot.UserID)
	if err != nil {
		return "", apperr.Internal(err)
	}
	pw := password.Normalize(newPassword)
	if err := s.checkNewPassword(ctx, pw, u.Email); err != nil {
		return "", err
	}
	pwHash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		return "", hashErr(err)
	}
	err = s.withUser(ctx, u.ID, func(tx store.UserTx, now time.Time) error {
		// Consuming is the atomic step: of two resets racing with one
		// token, only one gets here.
		if _, err := tx.ConsumeOneTimeToken(ctx, hash, store.PurposePasswordReset, now); err != nil {
			return err
		}
		revoked, err := tx.RevokeSessions(ctx, "password_reset", now)
		if err != nil {
			return err
		}
		if err := tx.SetPasswordHash(ctx, pwHash, now); err != nil {
			return err
		}
		if err := tx.SetEmailVerified(ctx, now); err != nil {
			return err
		}
		// The owner hears of it, in case it was not them.
		if err := s.queueNotice(ctx, tx, tx.User(), store.MailPasswordReset, now, m); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventPasswordReset, now, m, u.ID, "", map[string]any{"revoked_sessions": len(revoked)}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", errInvalidResetToken()
	}
	if err != nil {
		return "", apperr.Internal(err)
	}
	s.mailQueued()
	return u.Email, nil
}

// checkNewPassword applies the policy to a new password (change, reset):
// 422 with the reasons on field new_password, or 503 when the hashing pool
// has no room for the strength estimate.
func (s *Service) checkNewPassword(ctx context.Context, pw, email string) error {
	if pw == "" {
		e := apperr.New(apperr.KindMalformed, "malformed_request", "new_password is required.")
		e.Fields = []apperr.FieldError{{Field: "new_password", Code: "required", Message: "This field is required."}}
		return e
	}
	fields, err := s.hasher.Check(ctx, s.policy, pw, email)
	if err != nil {
		return hashErr(err)
	}
	if len(fields) == 0 {
		return nil
	}
	for i := range fields {
		fields[i].Field = "new_password"
	}
	e := apperr.New(apperr.KindUnprocessable, "validation_failed", "The new password does not meet the password policy.")
	e.Fields = fields
	return e
}

// VerifyEmail marks the email of the token's user verified.
func (s *Service) VerifyEmail(ctx context.Context, tok string, m Meta) error {
	if !token.WellFormed(tok) {
		return errInvalidVerificationToken()
	}
	now := s.clock()
	hash := token.Hash(tok)
	// The token names the user whose row the verification takes; consuming
	// it under that lock is the atomic step.
	ot, err := s.st.OneTimeTokenByHash(ctx, hash)
	if err == nil {
		err = s.st.WithUser(ctx, ot.UserID, func(tx store.UserTx) error {
			if _, err := tx.ConsumeOneTimeToken(ctx, hash, store.PurposeVerifyEmail, now); err != nil {
				return err
			}
			if err := tx.SetEmailVerified(ctx, now); err != nil {
				return err
			}
			return tx.AppendAudit(ctx, s.event(EventEmailVerified, now, m, ot.UserID, "", nil))
		})
	}
	if errors.Is(err, store.ErrNotFound) {
		return errInvalidVerificationToken()
	}
	if err != nil {
		return apperr.Internal(err)
	}
	return nil
}

// ResendVerification queues a new verification mail for the user, unless
// the email is verified already or one was queued within the resend
// interval: the answer is the same either way.
func (s *Service) ResendVerification(ctx context.Context, userID string, m Meta) error {
	now := s.clock()
	queued := false
	err := s.st.WithUser(ctx, userID, func(tx store.UserTx) error {
		// Under the user's lock, so that of two resends at once one sees
		// the other's mail and sends nothing: the queue is the rate limit.
		u := tx.User()
		if u.EmailVerifiedAt != nil || u.Status != store.StatusEnabled {
			return nil
		}
		last, err := tx.LastMailAt(ctx, store.PurposeVerifyEmail)
		switch {
		case err == nil && now.Sub(last) < s.cfg.ResendInterval:
			return nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		queued = true
		return s.queueLink(ctx, tx, u, store.PurposeVerifyEmail, s.cfg.VerifyTokenTTL, now)
	})
	if errors.Is(err, store.ErrNotFound) {
		return errInvalidToken()
	}
	if err != nil {
		return apperr.Internal(err)
	}
	if queued {
		s.mailQueued()
	}
	return nil
}
