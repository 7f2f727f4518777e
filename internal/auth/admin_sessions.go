package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// SessionPage is one page of a user's active sessions, newest first; Next
// is "" on the last page.
type SessionPage struct {
	Sessions []SessionView
	Next     string
}

// AdminSessions lists a user's active sessions, newest first.
func (s *Service) AdminSessions(ctx context.Context, a Actor, userID string, pq PageQuery) (SessionPage, error) {
	if _, err := s.AdminUser(ctx, a, userID); err != nil {
		return SessionPage{}, err
	}
	now := s.clock()
	ss, next, err := listPage(pq, cursorSessions,
		func(limit int, after *store.PageCursor) ([]store.Session, error) {
			return s.st.ListSessions(ctx, store.SessionFilter{UserID: userID, ActiveAt: now, Limit: limit, After: after})
		},
		func(x store.Session) (time.Time, string) { return x.CreatedAt, x.ID })
	if err != nil {
		return SessionPage{}, err
	}
	page := SessionPage{Next: next}
	page.Sessions = make([]SessionView, len(ss))
	for i, x := range ss {
		page.Sessions[i] = SessionView{Session: x, Current: a.SessionID != "" && x.ID == a.SessionID}
	}
	return page, nil
}

// AdminRevokeSessions revokes every session and refresh token of a user and
// audits session.revoked with the acting admin, also when there was none to
// revoke: the admin acted. It returns how many sessions it revoked.
func (s *Service) AdminRevokeSessions(ctx context.Context, a Actor, userID string, m Meta) (int, error) {
	// As in AdminUpdateUser: forbidden before the target's not_found.
	if err := s.authorizeRead(ctx, a); err != nil {
		return 0, err
	}
	var n int
	err := s.withUser(ctx, userID, func(tx store.UserTx, now time.Time) error {
		if err := authorizeWrite(ctx, tx, a); err != nil {
			return err
		}
		revoked, err := tx.RevokeSessions(ctx, "revoked_by_admin", now)
		if err != nil {
			return err
		}
		n = len(revoked)
		return tx.AppendAudit(ctx, s.adminEvent(EventSessionRevoked, now, m, a, userID,
			map[string]any{"reason": "revoked_by_admin", "revoked_sessions": n}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, errNoSuchUser()
	}
	if err != nil {
		return 0, asAppErr(err)
	}
	return n, nil
}
