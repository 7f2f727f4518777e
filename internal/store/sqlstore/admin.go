package sqlstore

import (
	"context"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// maxListPage bounds one ListUsers or ListSessions call whatever the caller
// asks.
const maxListPage = 1000

func listLimit(n int) int {
	if n <= 0 || n > maxListPage {
		return maxListPage
	}
	return n
}

func (q *queries) ListUsers(ctx context.Context, f store.UserFilter) ([]store.User, error) {
	var where []string
	var args []any
	if f.EmailContains != "" {
		// A substring test, not LIKE: the operator's text needs no escaping
		// of % and _.
		where, args = append(where, q.contains("email_normalized")), append(args, f.EmailContains)
	}
	if c := f.After; c != nil {
		where = append(where, "(created_at > ? OR (created_at = ? AND id > ?))")
		args = append(args, ts(c.CreatedAt), ts(c.CreatedAt), c.ID)
	}
	query := `SELECT ` + userColumns + ` FROM users`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at, id LIMIT ?"
	args = append(args, listLimit(f.Limit))
	var out []store.User
	err := q.selectAll(ctx, &out, query, args...)
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
	query := `SELECT ` + sessionColumns + ` FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?`
	args := []any{f.UserID, ts(f.ActiveAt)}
	if c := f.After; c != nil {
		query += " AND (created_at < ? OR (created_at = ? AND id < ?))"
		args = append(args, ts(c.CreatedAt), ts(c.CreatedAt), c.ID)
	}
	query += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, listLimit(f.Limit))
	var out []store.Session
	err := q.selectAll(ctx, &out, query, args...)
	return out, err
}

func (q *queries) UpdateUser(ctx context.Context, id string, ch store.UserChange, now time.Time) (before, after store.User, err error) {
	err = q.atomic(ctx, func(q *queries) error {
		// The row lock (the write lock on SQLite) makes concurrent updates
		// take turns, so each one's "before" is the previous one's "after".
		if err := q.get(ctx, &before, `SELECT `+userColumns+` FROM users WHERE id = ?`+q.forUpdate(), id); err != nil {
			return err
		}
		after = before
		sets, args := []string{"updated_at = ?"}, []any{ts(now)}
		for _, f := range []struct {
			column string
			value  *string
			field  *string
		}{
			{"status", ch.Status, &after.Status},
			{"role", ch.Role, &after.Role},
			{"tenant_id", ch.TenantID, &after.TenantID},
			{"organization_id", ch.OrganizationID, &after.OrganizationID},
		} {
			if f.value != nil {
				sets, args = append(sets, f.column+" = ?"), append(args, *f.value)
				*f.field = *f.value
			}
		}
		after.UpdatedAt = ts(now)
		_, err := q.exec(ctx, `UPDATE users SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(args, id)...)
		return err
	})
	if err != nil {
		return store.User{}, store.User{}, err
	}
	return before, after, nil
}
