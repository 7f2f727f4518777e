package auth

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// AuditEvent is an audit entry as the admin API hands it out.
type AuditEvent = store.AuditEvent

// AuditQuery selects audit entries; zero fields do not filter. Since is
// inclusive, Until exclusive.
type AuditQuery struct {
	UserID string
	Type   string
	Since  time.Time
	Until  time.Time
	Limit  int // 0: DefaultPageSize
	Cursor string
}

// AuditPage is one page of the audit trail, newest first; Next is "" on the
// last page.
type AuditPage struct {
	Events []AuditEvent
	Next   string
}

const maxFilterLen = 200

// AdminAudit queries the audit trail, newest first. Entries sharing a time
// are ordered by id, so pages neither skip nor repeat one.
func (s *Service) AdminAudit(ctx context.Context, a Actor, in AuditQuery) (AuditPage, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return AuditPage{}, err
	}
	if !validText(in.UserID, maxFilterLen) {
		return AuditPage{}, errMalformedField("user_id", "The user_id filter must be at most 200 printable characters.")
	}
	if !validText(in.Type, maxFilterLen) {
		return AuditPage{}, errMalformedField("type", "The type filter must be at most 200 printable characters.")
	}
	es, next, err := listPage(PageQuery{Limit: in.Limit, Cursor: in.Cursor}, cursorAudit,
		func(limit int, after *store.PageCursor) ([]store.AuditEvent, error) {
			return s.st.ListAudit(ctx, store.AuditFilter{
				UserID: in.UserID, Type: in.Type, Since: in.Since, Until: in.Until, Limit: limit, After: after,
			})
		},
		func(e store.AuditEvent) (time.Time, string) { return e.OccurredAt, e.ID })
	if err != nil {
		return AuditPage{}, err
	}
	return AuditPage{Events: es, Next: next}, nil
}
