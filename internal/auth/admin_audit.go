package auth

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
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
	limit, err := pageSize(in.Limit)
	if err != nil {
		return AuditPage{}, err
	}
	f := store.AuditFilter{UserID: in.UserID, Type: in.Type, Since: in.Since, Until: in.Until, Limit: limit + 1}
	if in.Cursor != "" {
		at, id, err := decodeCursor(cursorAudit, in.Cursor)
		if err != nil {
			return AuditPage{}, err
		}
		f.After = &store.AuditCursor{OccurredAt: at, ID: id}
	}
	es, err := s.st.ListAudit(ctx, f)
	if err != nil {
		return AuditPage{}, apperr.Internal(err)
	}
	page := AuditPage{Events: es}
	if len(es) > limit {
		page.Events = es[:limit]
		last := page.Events[limit-1]
		page.Next = encodeCursor(cursorAudit, last.OccurredAt, last.ID)
	}
	return page, nil
}
