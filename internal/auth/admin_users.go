package auth

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// Audit event types of account management (API.md section 5, plus
// user.updated for changes of role, tenant or organization).
const (
	EventUserDisabled = "user.disabled"
	EventUserEnabled  = "user.enabled"
	EventUserUpdated  = "user.updated"
)

// UserQuery selects users: Email keeps those whose normalized email
// contains it.
type UserQuery struct {
	Email  string
	Limit  int // 0: DefaultPageSize
	Cursor string
}

// UserPage is one page of users, oldest first; Next is "" on the last page.
type UserPage struct {
	Users []Account
	Next  string
}

// AdminUsers lists accounts, oldest first.
func (s *Service) AdminUsers(ctx context.Context, a Actor, in UserQuery) (UserPage, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return UserPage{}, err
	}
	email := NormalizeEmail(in.Email)
	if !utf8.ValidString(in.Email) || len(email) > maxEmailLen {
		return UserPage{}, errMalformedField("email", "The email filter must be at most 254 characters.")
	}
	us, next, err := listPage(PageQuery{Limit: in.Limit, Cursor: in.Cursor}, cursorUsers,
		func(limit int, after *store.PageCursor) ([]store.User, error) {
			return s.st.ListUsers(ctx, store.UserFilter{EmailContains: email, Limit: limit, After: after})
		},
		func(u store.User) (time.Time, string) { return u.CreatedAt, u.ID })
	if err != nil {
		return UserPage{}, err
	}
	page := UserPage{Users: make([]Account, len(us)), Next: next}
	for i, u := range us {
		page.Users[i] = accountOf(u)
	}
	return page, nil
}

// AdminUser returns one account.
func (s *Service) AdminUser(ctx context.Context, a Actor, id string) (Account, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return Account{}, err
	}
	u, err := s.st.UserByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Account{}, errNoSuchUser()
	}
	if err != nil {
		return Account{}, apperr.Internal(err)
	}
	return accountOf(u), nil
}

// AdminFindUser returns the account named by ref: an email when it holds an
// "@", else an id.
func (s *Service) AdminFindUser(ctx context.Context, a Actor, ref string) (Account, error) {
	if !strings.Contains(ref, "@") {
		return s.AdminUser(ctx, a, ref)
	}
	if err := s.authorizeRead(ctx, a); err != nil {
		return Account{}, err
	}
	u, err := s.st.UserByEmail(ctx, NormalizeEmail(ref))
	if errors.Is(err, store.ErrNotFound) {
		return Account{}, errNoSuchUser()
	}
	if err != nil {
		return Account{}, apperr.Internal(err)
	}
	return accountOf(u), nil
}

// UserPatch is a change of an account: nil fields stay as they are; ""
// clears TenantID and OrganizationID.
type UserPatch struct {
	Status         *string
	Role           *string
	TenantID       *string
	OrganizationID *string
}

const (
	maxRoleLen  = 64
	maxScopeLen = 200
)

// validRole: letters, digits and _ . : - (not first), at most 64. Roles
// end up in access tokens and in X-Auth-Role headers of upstream apps.
func validRole(r string) bool {
	if r == "" || len(r) > maxRoleLen {
		return false
	}
	for i, c := range r {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && strings.ContainsRune("_.:-", c):
		default:
			return false
		}
	}
	return true
}

// validScope: a tenant or organization id, printable without spaces, at
// most 200 characters; "" clears it.
func validScope(v string) bool {
	return validText(v, maxScopeLen) && !strings.ContainsFunc(v, func(r rune) bool { return r == ' ' || r == '\u00a0' })
}

func (p UserPatch) check() error {
	var fields []apperr.FieldError
	if p.Status != nil && *p.Status != store.StatusEnabled && *p.Status != store.StatusDisabled {
		fields = append(fields, apperr.FieldError{Field: "status", Code: "invalid", Message: `status must be "enabled" or "disabled".`})
	}
	if p.Role != nil && !validRole(*p.Role) {
		fields = append(fields, apperr.FieldError{Field: "role", Code: "invalid", Message: "role must be 1 to 64 letters, digits or _ . : - (not first)."})
	}
	if p.TenantID != nil && !validScope(*p.TenantID) {
		fields = append(fields, apperr.FieldError{Field: "tenant_id", Code: "invalid", Message: "tenant_id must be at most 200 printable characters without spaces."})
	}
	if p.OrganizationID != nil && !validScope(*p.OrganizationID) {
		fields = append(fields, apperr.FieldError{Field: "organization_id", Code: "invalid", Message: "organization_id must be at most 200 printable characters without spaces."})
	}
	if len(fields) == 0 {
		return nil
	}
	e := apperr.New(apperr.KindUnprocessable, "validation_failed", "The change is not valid.")
	e.Fields = fields
	return e
}

func (p UserPatch) empty() bool {
	return p.Status == nil && p.Role == nil && p.TenantID == nil && p.OrganizationID == nil
}

// AdminUpdateUser changes an account. Disabling revokes every session and
// refresh token of the user. The change, the revocation and their audit
// entries (user.disabled or user.enabled for the status, user.updated for
// the rest, each with the acting admin) commit together.
func (s *Service) AdminUpdateUser(ctx context.Context, a Actor, id string, p UserPatch, m Meta) (Account, error) {
	// Before the target's lock, whose not_found would tell a demoted admin
	// which ids exist; authorizeWrite decides again under the lock.
	if err := s.authorizeRead(ctx, a); err != nil {
		return Account{}, err
	}
	if err := p.check(); err != nil {
		return Account{}, err
	}
	var after store.User
	err := s.withUser(ctx, id, func(tx store.UserTx, now time.Time) error {
		if err := authorizeWrite(ctx, tx, a); err != nil {
			return err
		}
		// The lock makes concurrent changes of one account take turns:
		// each one's before is the previous one's after.
		before := tx.User()
		if p.empty() {
			after = before
			return nil
		}
		var err error
		if after, err = tx.Update(ctx, store.UserChange{
			Status: p.Status, Role: p.Role, TenantID: p.TenantID, OrganizationID: p.OrganizationID,
		}, now); err != nil {
			return err
		}
		if err := s.recordStatus(ctx, tx, a, m, before, after, now); err != nil {
			return err
		}
		changes := map[string]any{}
		for _, f := range []struct{ name, from, to string }{
			{"role", before.Role, after.Role},
			{"tenant_id", before.TenantID, after.TenantID},
			{"organization_id", before.OrganizationID, after.OrganizationID},
		} {
			if f.from != f.to {
				changes[f.name] = map[string]string{"from": f.from, "to": f.to}
			}
		}
		if len(changes) == 0 {
			return nil
		}
		return tx.AppendAudit(ctx, s.adminEvent(EventUserUpdated, now, m, a, id, map[string]any{"changes": changes}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return Account{}, errNoSuchUser()
	}
	if err != nil {
		return Account{}, asAppErr(err)
	}
	return accountOf(after), nil
}

// recordStatus revokes the sessions of a disabled account and audits a
// change of status.
func (s *Service) recordStatus(ctx context.Context, tx store.UserTx, a Actor, m Meta, before, after store.User, now time.Time) error {
	if after.Status == store.StatusDisabled {
		// Also when it was disabled already: a session must not outlive
		// the operator's intent, however it came to exist.
		revoked, err := tx.RevokeSessions(ctx, "account_disabled", now)
		if err != nil {
			return err
		}
		switch {
		case before.Status != store.StatusDisabled:
			return tx.AppendAudit(ctx, s.adminEvent(EventUserDisabled, now, m, a, after.ID, map[string]any{"revoked_sessions": len(revoked)}))
		case len(revoked) > 0:
			return tx.AppendAudit(ctx, s.adminEvent(EventSessionRevoked, now, m, a, after.ID,
				map[string]any{"reason": "account_disabled", "revoked_sessions": len(revoked)}))
		}
		return nil
	}
	if before.Status != after.Status {
		return tx.AppendAudit(ctx, s.adminEvent(EventUserEnabled, now, m, a, after.ID, nil))
	}
	return nil
}
