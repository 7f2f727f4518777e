package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/token"
)

func errRefreshRevoked() error {
	return apperr.New(apperr.KindUnauthenticated, "refresh_token_revoked", "The refresh token is not valid.")
}

func errRefreshExpired() error {
	return apperr.New(apperr.KindUnauthenticated, "refresh_token_expired", "The refresh token has expired.")
}

// Refresh exchanges a refresh token for a new access token and a new refresh
// token. The presented token is rotated: presenting it again later is
// treated as theft and revokes every session of the user. The new token
// lives RefreshTokenTTL, but never past its session's end (the store caps
// it), so refresh_expires_in shrinks as that end nears, and once it has
// come the session's token is expired.
func (s *Service) Refresh(ctx context.Context, presented string, m Meta) (TokenPair, error) {
	if !token.WellFormed(presented) {
		return TokenPair{}, errRefreshRevoked()
	}
	hash := token.Hash(presented)
	next := token.Successor(s.successor, presented)
	now := s.clock()
	child := store.RefreshToken{Hash: token.Hash(next), IssuedAt: now, ExpiresAt: now.Add(s.cfg.RefreshTokenTTL)}
	// The rotation and its audit entry are one atomic store operation (one
	// round trip on PostgreSQL); the owner comes back with it.
	used := s.event(EventRefreshTokenUsed, now, m, "", "", nil)
	rot, err := s.st.RotateRefreshToken(ctx, store.RotateRequest{Hash: hash, Next: child, Now: now, IP: m.IP, UserAgent: m.userAgent(), Event: &used})
	switch {
	case err == nil:
		return s.pair(ctx, rot.User, rot.Token.SessionID, next, remaining(rot.NextExpiresAt, now))
	case errors.Is(err, store.ErrNotFound):
		return TokenPair{}, errRefreshRevoked()
	case errors.Is(err, store.ErrPrecondition):
		return s.refused(ctx, rot, presented, next, now, m)
	default:
		return TokenPair{}, asAppErr(err)
	}
}

// pair mints the access token for the session and pairs it with the
// refresh token. It runs after the transaction commits: the RSA signature
// is the costliest step and must not hold a database lock. If it fails
// the rotation stands and the client retries under the reuse leeway.
func (s *Service) pair(ctx context.Context, u store.User, sessionID, refresh string, refreshTTL time.Duration) (TokenPair, error) {
	access, err := s.minter.Mint(ctx, claimsFor(u, sessionID))
	if err != nil {
		return TokenPair{}, apperr.Internal(err)
	}
	return TokenPair{
		AccessToken: access, RefreshToken: refresh, ExpiresIn: s.minter.TTL(),
		RefreshExpiresIn: refreshTTL, SessionID: sessionID,
	}, nil
}

// refused decides what a token that could not be rotated means. A rotated,
// unexpired token is a theft signal, except for the one case the reuse
// leeway forgives: the session's latest rotated token presented again
// shortly after its rotation, as a client that lost the response would.
func (s *Service) refused(ctx context.Context, rot store.Rotation, presented, next string, now time.Time, m Meta) (TokenPair, error) {
	t := rot.Token
	switch {
	case t.RotatedAt != nil && now.Before(t.ExpiresAt):
		if s.withinLeeway(rot, next, now) {
			return s.replaySuccessor(ctx, rot, next, now, m)
		}
		err := s.withUser(ctx, t.UserID, func(tx store.UserTx, now time.Time) error {
			revoked, err := tx.RevokeSessions(ctx, "refresh_token_reused", now)
			if err != nil {
				return err
			}
			return tx.AppendAudit(ctx, s.event(EventRefreshTokenReuse, now, m, t.UserID, t.SessionID,
				map[string]any{"revoked_sessions": len(revoked)}))
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return TokenPair{}, apperr.Internal(err)
		}
		return TokenPair{}, errRefreshRevoked()
	case t.RevokedAt != nil:
		return TokenPair{}, errRefreshRevoked()
	case !now.Before(t.ExpiresAt):
		return TokenPair{}, errRefreshExpired()
	default:
		return TokenPair{}, errRefreshRevoked()
	}
}

func (s *Service) withinLeeway(rot store.Rotation, next string, now time.Time) bool {
	t, c := rot.Token, rot.Child
	if s.cfg.RefreshReuseLeeway <= 0 || c == nil || t.RevokedAt != nil {
		return false
	}
	if now.Sub(*t.RotatedAt) > s.cfg.RefreshReuseLeeway || c.RotatedAt != nil || c.RevokedAt != nil || !now.Before(c.ExpiresAt) {
		return false
	}
	// The child must be the token derived from the presented one; anything
	// else means the chain is not ours to replay.
	return subtle.ConstantTimeCompare([]byte(c.Hash), []byte(token.Hash(next))) == 1
}

func (s *Service) replaySuccessor(ctx context.Context, rot store.Rotation, next string, now time.Time, m Meta) (TokenPair, error) {
	var u store.User
	t := rot.Token
	err := s.st.WithUser(ctx, t.UserID, func(tx store.UserTx) error {
		// A disabled account gets nothing.
		if u = tx.User(); u.Status != store.StatusEnabled {
			return errRefreshRevoked()
		}
		// The token and its successor were read before the lock: a
		// logout, a revocation or the successor's own use since then
		// ends the replay, or a revoked session would get a fresh access
		// token from a request that merely waited for the lock.
		if err := tx.TouchSession(ctx, t.SessionID, rot.Child.Hash, now, m.IP, m.userAgent()); errors.Is(err, store.ErrNotFound) {
			return errRefreshRevoked()
		} else if err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventRefreshTokenUsed, now, m, t.UserID, t.SessionID,
			map[string]any{"reuse_within_leeway": true, "reason": "rotated token presented again within the reuse leeway; successor replayed"}))
	})
	if err != nil {
		return TokenPair{}, asAppErr(err)
	}
	return s.pair(ctx, u, t.SessionID, next, remaining(rot.Child.ExpiresAt, now))
}

// Logout revokes the session the refresh token belongs to. Unknown and
// already revoked tokens succeed too: logout is idempotent.
func (s *Service) Logout(ctx context.Context, presented string, m Meta) error {
	if !token.WellFormed(presented) {
		return nil
	}
	t, err := s.st.RefreshTokenByHash(ctx, token.Hash(presented))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return apperr.Internal(err)
	}
	err = s.withUser(ctx, t.UserID, func(tx store.UserTx, now time.Time) error {
		changed, err := tx.RevokeSession(ctx, t.SessionID, "logout", now)
		if err != nil || !changed {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventUserLoggedOut, now, m, t.UserID, t.SessionID, nil))
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return apperr.Internal(err)
	}
	return nil
}

// LogoutAll revokes every session of the user. Access tokens already issued
// stay valid until they expire: they are stateless by design.
func (s *Service) LogoutAll(ctx context.Context, userID, sessionID string, m Meta) error {
	err := s.withUser(ctx, userID, func(tx store.UserTx, now time.Time) error {
		revoked, err := tx.RevokeSessions(ctx, "logout_all", now)
		if err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventUserLoggedOutAll, now, m, userID, sessionID, map[string]any{"revoked_sessions": len(revoked)}))
	})
	// An account that no longer exists has no session left to end.
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return apperr.Internal(err)
	}
	return nil
}

// asAppErr keeps domain errors as they are and makes anything else internal.
func asAppErr(err error) error {
	var e *apperr.Error
	if errors.As(err, &e) {
		return e
	}
	return apperr.Internal(err)
}
