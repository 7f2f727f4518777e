package sqlstore

import (
	"context"
	"strings"

	"github.com/palisade-auth/palisade/internal/store"
)

const auditColumns = `id, type, occurred_at, user_id, session_id, actor_id, ip, user_agent, request_id, data`

// maxAuditPage bounds one ListAudit call whatever the caller asks.
const maxAuditPage = 1000

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
	if c := f.After; c != nil {
		where = append(where, "(occurred_at < ? OR (occurred_at = ? AND id < ?))")
		args = append(args, ts(c.OccurredAt), ts(c.OccurredAt), c.ID)
	}
	limit := f.Limit
	if limit <= 0 || limit > maxAuditPage {
		limit = maxAuditPage
	}
	query := `SELECT ` + auditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY occurred_at DESC, id DESC LIMIT ?"
	args = append(args, limit)
	var out []store.AuditEvent
	err := q.selectAll(ctx, &out, query, args...)
	return out, err
}
