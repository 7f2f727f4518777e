package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
)

// EventPasswordChanged is recorded when a user changes their password.
const EventPasswordChanged = "password.changed"

// ChangePasswordInput is a password change by the account's owner.
type ChangePasswordInput struct {
	Current string
	New     string
}

// ChangePassword replaces the password of userID (acting in sessionID)
// after checking the
// current one, and revokes every refresh token of the user: whoever held a
// session under the old password must log in again. Access tokens already
// issued stay valid until they expire. A mail telling the owner of the
// change (when, from which client) is queued in the same transaction.
func (s *Service) ChangePassword(ctx context.Context, userID, sessionID string, in ChangePasswordInput, m Meta) error {
	var fields []apperr.FieldError
	for f, v := range []string{in.Current, in.New} {
		if v == "" {
			name := [...]string{"current_password", "new_password"}[f]
			fields = append(fields, apperr.FieldError{Field: name, Code: "required", Message: "This field is required."})
		}
	}
	if len(fields) > 0 {
		e := apperr.New(apperr.KindMalformed, "malformed_request", "current_password and new_password are required.")
		e.Fields = fields
		return e
	}
	u, err := s.st.UserByID(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return errInvalidToken()
	}
	if err != nil {
		return apperr.Internal(err)
	}
	if u.Status != store.StatusEnabled {
		return errAccountDisabled()
	}
	ok, _, err := s.hasher.Verify(ctx, password.Normalize(in.Current), u.PasswordHash)
	if err != nil && !errors.Is(err, password.ErrMalformedHash) {
		return hashErr(err)
	}
	if !ok {
		return errCurrentPasswordIncorrect()
	}
	pw := password.Normalize(in.New)
	if err := s.checkNewPassword(ctx, pw, u.Email); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		return hashErr(err)
	}
	err = s.withUser(ctx, u.ID, func(tx store.UserTx, now time.Time) error {
		// Re-read under the user's lock: a change or reset that committed
		// while this one was hashing made the password just checked stale,
		// and last-writer-wins would let a stale password overrule it.
		cur := tx.User()
		if cur.Status != store.StatusEnabled {
			return errAccountDisabled()
		}
		if cur.PasswordHash != u.PasswordHash {
			return errCurrentPasswordIncorrect()
		}
		revoked, err := tx.RevokeSessions(ctx, "password_changed", now)
		if err != nil {
			return err
		}
		if err := tx.SetPasswordHash(ctx, hash, now); err != nil {
			return err
		}
		if err := s.queueNotice(ctx, tx, cur, store.MailPasswordChanged, now, m); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventPasswordChanged, now, m, u.ID, sessionID, map[string]any{"revoked_sessions": len(revoked)}))
	})
	if err != nil {
		return asAppErr(err)
	}
	s.mailQueued()
	return nil
}

func errCurrentPasswordIncorrect() error {
	return apperr.New(apperr.KindForbidden, "current_password_incorrect", "The current password is incorrect.")
}

// hashErr is what a failed password hash means for the caller: when the
// hashing pool's queue is full the request is shed at once (503 with
// Retry-After), instead of queueing without bound under a login flood;
// anything else is our fault.
func hashErr(err error) error {
	if errors.Is(err, password.ErrBusy) {
		return apperr.Wrap(apperr.KindUnavailable, "overloaded", "The service is busy; retry shortly.", err)
	}
	return apperr.Internal(err)
}
