package sqlstore

import (
	"context"

	"github.com/palisade-auth/palisade/internal/store"
)

func (q *queries) ListUsers(ctx context.Context, f store.UserFilter) ([]store.User, error) {
	var where []string
	var args []any
	if f.EmailContains != "" {
		// A substring test, not LIKE: the operator's text needs no escaping
		// of % and _.
		where, args = append(where, q.contains("email_normalized")), append(args, f.EmailContains)
	}
	where, args = afterCursor(where, args, "created_at", false, f.After)
	args = append(args, pageLimit(f.Limit))
	var out []store.User
	err := q.selectAll(ctx, &out, pageQuery(`SELECT `+userColumns+` FROM users`, where, "created_at, id"), args...)
	return out, err
}

// contains is the dialect's "column contains the parameter" test.
func (q *queries) contains(column string) string {
	if q.dialect == Postgres {
		return "strpos(" + column + ", ?) > 0"
	}
	return "instr(" + column + ", ?) > 0"
}

func (q *queries) ListSessions(ctx context.Context, f store.SessionFilter) ([]store.Session, error) {
	where := []string{"user_id = ?", "revoked_at IS NULL", "expires_at > ?"}
	args := []any{f.UserID, ts(f.ActiveAt)}
	where, args = afterCursor(where, args, "created_at", true, f.After)
	args = append(args, pageLimit(f.Limit))
	var out []store.Session
	err := q.selectAll(ctx, &out, pageQuery(`SELECT `+sessionColumns+` FROM sessions`, where, "created_at DESC, id DESC"), args...)
	return out, err
}
