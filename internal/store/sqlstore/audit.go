package sqlstore

import (
	"context"

	"github.com/palisade-auth/palisade/internal/store"
)

const auditColumns = `id, type, occurred_at, user_id, session_id, actor_id, ip, user_agent, request_id, data`

func (q *queries) AppendAudit(ctx context.Context, e store.AuditEvent) error {
	_, err := q.exec(ctx, `INSERT INTO audit_events (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, `+q.jsonParam()+`)`,
		e.ID, e.Type, ts(e.OccurredAt), e.UserID, e.SessionID, e.ActorID, e.IP, e.UserAgent, e.RequestID, jsonData(e.Data))
	return err
}

// jsonData is an event's data as the database takes it: text, since lib/pq
// would send []byte as bytea; an empty object when there is none.
func jsonData(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

func (q *queries) jsonParam() string {
	if q.dialect == Postgres {
		return "CAST(? AS jsonb)"
	}
	return "?"
}

func (q *queries) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error) {
	var where []string
	var args []any
	if f.UserID != "" {
		where, args = append(where, "user_id = ?"), append(args, f.UserID)
	}
	if f.Type != "" {
		where, args = append(where, "type = ?"), append(args, f.Type)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "occurred_at >= ?"), append(args, ts(f.Since))
	}
	if !f.Until.IsZero() {
		where, args = append(where, "occurred_at < ?"), append(args, ts(f.Until))
	}
	where, args = afterCursor(where, args, "occurred_at", true, f.After)
	args = append(args, pageLimit(f.Limit))
	var out []store.AuditEvent
	err := q.selectAll(ctx, &out, pageQuery(`SELECT `+auditColumns+` FROM audit_events`, where, "occurred_at DESC, id DESC"), args...)
	return out, err
}
