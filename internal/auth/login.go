package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/token"
)

const maxDeviceField = 200

// LoginInput is a login request.
type LoginInput struct {
	Email      string
	Password   string
	DeviceID   string // optional; a login for a device the user already has replaces that device's session
	DeviceName string
}

// errInvalidCredentials is the one answer for an unknown email and a wrong
// password alike.
func errInvalidCredentials() error {
	return apperr.New(apperr.KindUnauthenticated, "invalid_credentials", "The email or password is incorrect.")
}

// Login checks the credentials and opens a session for the device.
func (s *Service) Login(ctx context.Context, in LoginInput, m Meta) (TokenPair, error) {
	if !validText(in.DeviceID, maxDeviceField) || !validText(in.DeviceName, maxDeviceField) {
		e := apperr.New(apperr.KindMalformed, "malformed_request", "The request is not valid.")
		e.Fields = []apperr.FieldError{{Field: "device_id", Code: "invalid", Message: "device_id and device_name must be at most 200 printable characters."}}
		return TokenPair{}, e
	}
	pw := password.Normalize(in.Password)
	emailNorm := NormalizeEmail(in.Email)
	u, err := s.st.UserByEmail(ctx, emailNorm)
	if errors.Is(err, store.ErrNotFound) {
		// Spend the same hashing work as for a real account, so the answer's
		// timing does not tell whether the email is registered.
		if err := s.hasher.VerifyDummy(ctx, pw); err != nil {
			return TokenPair{}, hashErr(err)
		}
		s.recordFailure(ctx, m, "", "unknown_email", emailNorm)
		return TokenPair{}, errInvalidCredentials()
	}
	if err != nil {
		return TokenPair{}, apperr.Internal(err)
	}
	ok, rehash, err := s.hasher.Verify(ctx, pw, u.PasswordHash)
	if err != nil && !errors.Is(err, password.ErrMalformedHash) {
		return TokenPair{}, hashErr(err)
	}
	if err != nil || !ok {
		if err != nil {
			s.log.ErrorContext(ctx, "stored password hash unreadable", "user_id", u.ID, "err", err)
		}
		s.recordFailure(ctx, m, u.ID, "wrong_password", "")
		return TokenPair{}, errInvalidCredentials()
	}
	if u.Status != store.StatusEnabled {
		s.recordFailure(ctx, m, u.ID, "account_disabled", "")
		return TokenPair{}, errAccountDisabled()
	}
	if s.cfg.RequireVerifiedEmail && u.EmailVerifiedAt == nil {
		s.recordFailure(ctx, m, u.ID, "email_not_verified", "")
		return TokenPair{}, apperr.New(apperr.KindForbidden, "email_not_verified", "The email address is not verified yet.")
	}
	var newHash string
	if rehash {
		// Upgrade legacy or outdated hashes while we hold the plain password;
		// a failure here must not fail the login.
		if newHash, err = s.hasher.Hash(ctx, pw); err != nil {
			s.log.WarnContext(ctx, "password rehash failed", "user_id", u.ID, "err", err)
			newHash = ""
		}
	}
	return s.openSession(ctx, u, in, newHash, m)
}

// recordFailure writes login.failed. The reason stays in the audit trail;
// the client only ever sees invalid_credentials.
func (s *Service) recordFailure(ctx context.Context, m Meta, userID, reason, email string) {
	data := map[string]any{"reason": reason}
	if email != "" {
		data["email"] = truncate(email, maxEmailLen)
	}
	if err := s.st.AppendAudit(ctx, s.event(EventLoginFailed, s.clock(), m, userID, "", data)); err != nil {
		s.log.ErrorContext(ctx, "audit login.failed", "err", err)
	}
}

func (s *Service) openSession(ctx context.Context, u store.User, in LoginInput, newHash string, m Meta) (TokenPair, error) {
	now := s.clock()
	refresh, err := token.NewOpaque(s.rand)
	if err != nil {
		return TokenPair{}, apperr.Internal(err)
	}
	deviceID := in.DeviceID
	if deviceID == "" {
		deviceID = s.newID()
	}
	end := now.Add(s.cfg.SessionMaxLifetime)
	sess := store.Session{
		ID: s.newID(), UserID: u.ID, DeviceID: deviceID, DeviceName: in.DeviceName,
		UserAgent: m.userAgent(), IP: m.IP,
		CreatedAt: now, LastUsedAt: now, ExpiresAt: minTime(now.Add(s.cfg.RefreshTokenTTL), end), MaxExpiresAt: end,
	}
	access, err := s.minter.Mint(ctx, claimsFor(u, sess.ID))
	if err != nil {
		return TokenPair{}, apperr.Internal(err)
	}
	tok := store.RefreshToken{Hash: token.Hash(refresh), SessionID: sess.ID, UserID: u.ID, IssuedAt: now, ExpiresAt: sess.ExpiresAt}
	var refusal string
	err = s.st.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		// Under the user's lock: a disable or a password change that
		// committed while the password was being checked is seen here, and
		// one that comes later waits for this login and revokes its session.
		switch cur := tx.User(); {
		case cur.Status != store.StatusEnabled:
			refusal = "account_disabled"
		case cur.PasswordHash != u.PasswordHash:
			refusal = "password_changed"
		}
		if refusal != "" {
			return errLoginRefused
		}
		if newHash != "" {
			if err := tx.SetPasswordHash(ctx, newHash, now); err != nil {
				return err
			}
		}
		if err := s.makeRoom(ctx, tx, deviceID, m, now); err != nil {
			return err
		}
		if err := tx.CreateSession(ctx, sess); err != nil {
			return err
		}
		if err := tx.CreateRefreshToken(ctx, tok); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventUserLoggedIn, now, m, u.ID, sess.ID, map[string]any{"device_id": deviceID}))
	})
	if errors.Is(err, errLoginRefused) || errors.Is(err, store.ErrNotFound) {
		if refusal == "account_disabled" {
			s.recordFailure(ctx, m, u.ID, refusal, "")
			return TokenPair{}, errAccountDisabled()
		}
		s.recordFailure(ctx, m, u.ID, "password_changed", "")
		return TokenPair{}, errInvalidCredentials()
	}
	if err != nil {
		return TokenPair{}, apperr.Internal(err)
	}
	return TokenPair{
		AccessToken: access, RefreshToken: refresh, ExpiresIn: s.minter.TTL(),
		RefreshExpiresIn: sess.ExpiresAt.Sub(now), SessionID: sess.ID,
	}, nil
}

// makeRoom revokes, in a login's transaction, the session of the device
// the login is for (a login for a device the user already has replaces
// its session) and the least recently used ones past the user's limit,
// keeping room for the new session, which is never one revoked.
func (s *Service) makeRoom(ctx context.Context, tx store.UserTx, deviceID string, m Meta, now time.Time) error {
	userID := tx.User().ID
	old, err := tx.ActiveSessionByDevice(ctx, deviceID, now)
	switch {
	case err == nil:
		if _, err := tx.RevokeSession(ctx, old.ID, "replaced", now); err != nil {
			return err
		}
		if err := tx.AppendAudit(ctx, s.event(EventSessionRevoked, now, m, userID, old.ID, map[string]any{"reason": "replaced"})); err != nil {
			return err
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	evicted, err := tx.RevokeSessionsPast(ctx, s.cfg.MaxSessionsPerUser-1, "session_limit", now)
	if err != nil {
		return err
	}
	for _, id := range evicted {
		if err := tx.AppendAudit(ctx, s.event(EventSessionRevoked, now, m, userID, id, map[string]any{"reason": "session_limit"})); err != nil {
			return err
		}
	}
	return nil
}

// errLoginRefused ends a login's transaction when the account changed while
// its password was being checked; nothing is written.
var errLoginRefused = errors.New("auth: account changed during login")

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func claimsFor(u store.User, sessionID string) token.Claims {
	return token.Claims{Subject: u.ID, Role: u.Role, SessionID: sessionID, TenantID: u.TenantID, OrganizationID: u.OrganizationID}
}

// remaining is the time left until t, never negative.
func remaining(t, now time.Time) time.Duration {
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}

func errAccountDisabled() error {
	return apperr.New(apperr.KindForbidden, "account_disabled", "The account is disabled.")
}
