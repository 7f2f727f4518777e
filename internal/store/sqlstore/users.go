package sqlstore

import (
	"context"

	"github.com/palisade-auth/palisade/internal/store"
)

const userColumns = `id, email, email_normalized, password_hash, name, role, status,
	email_verified_at, tenant_id, organization_id, created_at, updated_at`

func (q *queries) CreateUser(ctx context.Context, u store.User) error {
	_, err := q.exec(ctx, `INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.Email, u.EmailNormalized, u.PasswordHash, u.Name, u.Role, u.Status,
		tsp(u.EmailVerifiedAt), u.TenantID, u.OrganizationID, ts(u.CreatedAt), ts(u.UpdatedAt))
	return err
}

func (q *queries) UserByID(ctx context.Context, id string) (store.User, error) {
	var u store.User
	err := q.get(ctx, &u, `SELECT `+userColumns+` FROM users WHERE id = ?`, id)
	return u, err
}

func (q *queries) UserByEmail(ctx context.Context, emailNormalized string) (store.User, error) {
	var u store.User
	err := q.get(ctx, &u, `SELECT `+userColumns+` FROM users WHERE email_normalized = ?`, emailNormalized)
	return u, err
}
