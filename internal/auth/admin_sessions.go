package auth

import (
	"context"
	"errors"

	"github.com/palisade-auth/palisade/internal/apperr"
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
	limit, err := pageSize(pq.Limit)
	if err != nil {
		return SessionPage{}, err
	}
	f := store.SessionFilter{UserID: userID, ActiveAt: s.clock(), Limit: limit + 1}
	if pq.Cursor != "" {
		at, id, err := decodeCursor(cursorSessions, pq.Cursor)
		if err != nil {
			return SessionPage{}, err
		}
		f.After = &store.SessionCursor{CreatedAt: at, ID: id}
	}
	ss, err := s.st.ListSessions(ctx, f)
	if err != nil {
		return SessionPage{}, apperr.Internal(err)
	}
	var page SessionPage
	if len(ss) > limit {
		ss = ss[:limit]
		last := ss[limit-1]
		page.Next = encodeCursor(cursorSessions, last.CreatedAt, last.ID)
	}
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
	if err := AuthorizeAdmin(a); err != nil {
		return 0, err
	}
	now := s.clock()
	var n int
	err := s.st.InTx(ctx, func(q store.Queries) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
		if _, err := q.UserByID(ctx, userID); err != nil {
			return err
		}
		revoked, err := q.RevokeUserSessions(ctx, userID, "revoked_by_admin", now)
		if err != nil {
			return err
		}
		n = len(revoked)
		return q.AppendAudit(ctx, s.adminEvent(EventSessionRevoked, now, m, a, userID,
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
