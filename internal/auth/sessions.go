package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// SessionView is a session as its owner sees it.
type SessionView struct {
	store.Session
	Current bool // the session of the access token that asked
}

// Sessions lists the user's active sessions, newest first: at most
// MaxSessionsPerUser, which only a user who had more before the limit
// was lowered can exceed until their next login.
func (s *Service) Sessions(ctx context.Context, userID, currentSessionID string) ([]SessionView, error) {
	ss, err := s.st.ActiveSessions(ctx, userID, s.clock(), s.cfg.MaxSessionsPerUser)
	if err != nil {
		return nil, apperr.Internal(err)
	}
	out := make([]SessionView, len(ss))
	for i, x := range ss {
		out[i] = SessionView{Session: x, Current: x.ID == currentSessionID}
	}
	return out, nil
}

// RevokeSession ends one of the user's own sessions. Another user's session
// is reported as not found, so ids of others cannot be probed.
func (s *Service) RevokeSession(ctx context.Context, userID, sessionID string, m Meta) error {
	err := s.withUser(ctx, userID, func(tx store.UserTx, now time.Time) error {
		// Not found unless the session is the user's own.
		changed, err := tx.RevokeSession(ctx, sessionID, "revoked_by_user", now)
		if err != nil || !changed {
			return err
		}
		return tx.AppendAudit(ctx, s.event(EventSessionRevoked, now, m, userID, sessionID, map[string]any{"reason": "revoked_by_user"}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return apperr.New(apperr.KindNotFound, "not_found", "No such session.")
	}
	if err != nil {
		return apperr.Internal(err)
	}
	return nil
}
