package store

import (
	"context"
	"time"
)

// UserFilter selects users for the operators' listing; zero fields do not
// filter. Results are oldest first: (CreatedAt, ID) ascending.
type UserFilter struct {
	// EmailContains keeps users whose normalized email contains it
	// (compared as is: pass it normalized).
	EmailContains string
	Limit         int
	After         *PageCursor // the (CreatedAt, ID) of the last user seen
}

// SessionFilter selects one user's active sessions: unrevoked and unexpired
// at ActiveAt. Results are newest first: (CreatedAt, ID) descending.
type SessionFilter struct {
	UserID   string
	ActiveAt time.Time
	Limit    int
	After    *PageCursor // the (CreatedAt, ID) of the last session seen
}

// UserChange is a partial update of a user: nil fields stay as they are.
type UserChange struct {
	Status         *string
	Role           *string
	TenantID       *string
	OrganizationID *string
}

// AdminQueries are the operations of the operators' user management.
type AdminQueries interface {
	// ListUsers returns users matching f, oldest first, at most f.Limit
	// (a backend bound applies when it is 0 or larger).
	ListUsers(ctx context.Context, f UserFilter) ([]User, error)
	// ListSessions returns the sessions matching f, newest first, at most
	// f.Limit (a backend bound applies when it is 0 or larger).
	ListSessions(ctx context.Context, f SessionFilter) ([]Session, error)
}
