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

// RoleAdmin may manage accounts and read the audit trail.
const RoleAdmin = "admin"

// AuditEvent is an audit entry as the admin API hands it out.
type AuditEvent = store.AuditEvent

// Actor is who performs an administrative action: an admin calling the API,
// or the operator at the command line.
type Actor struct {
	UserID    string // the admin's account (the access token's sub)
	Role      string // the role the access token claims
	SessionID string // the admin's session (sid), marked as current in session lists
	operator  bool
}

// Operator is the actor of the issuer's command line. It has no account:
// whoever can run the CLI against the database and the key-encryption key
// already holds every secret, so no role is checked. Its audit entries have
// no actor_id and carry {"via": "cli"} in their data.
func Operator() Actor { return Actor{operator: true} }

func errForbidden() error {
	return apperr.New(apperr.KindForbidden, "forbidden", "This action requires the admin role.")
}

func errNoSuchUser() error {
	return apperr.New(apperr.KindNotFound, "not_found", "No such user.")
}

// AuthorizeAdmin is the first check of every admin call: the role the
// access token claims must be admin. It costs nothing, so the transport
// runs it before it reads anything of the request. Every call then checks
// again against the database (authorizeRead, authorizeWrite).
func AuthorizeAdmin(a Actor) error {
	if a.operator || (a.UserID != "" && a.Role == RoleAdmin) {
		return nil
	}
	return errForbidden()
}

// authorizeRead re-reads the acting admin before a read: an admin demoted
// or disabled since their access token was minted (it lives up to its TTL)
// must not keep reading accounts, sessions and the audit trail.
func (s *Service) authorizeRead(ctx context.Context, a Actor) error {
	if err := authorizeWrite(ctx, s.st, a); err != nil {
		return asAppErr(err)
	}
	return nil
}

// authorizeWrite re-reads the acting admin inside the write's transaction:
// an admin demoted or disabled since their access token was minted (it lives
// up to its TTL) must not keep the power to change accounts.
func authorizeWrite(ctx context.Context, q store.Queries, a Actor) error {
	if err := AuthorizeAdmin(a); err != nil || a.operator {
		return err
	}
	u, err := q.UserByID(ctx, a.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return errForbidden()
	}
	if err != nil {
		return err
	}
	if u.Status != store.StatusEnabled || u.Role != RoleAdmin {
		return errForbidden()
	}
	return nil
}

// adminEvent is an audit entry of an admin action on userID.
func (s *Service) adminEvent(typ string, at time.Time, m Meta, a Actor, userID string, data map[string]any) store.AuditEvent {
	if data == nil {
		data = map[string]any{}
	}
	data["via"] = "api"
	if a.operator {
		data["via"] = "cli"
	}
	e := s.event(typ, at, m, userID, "", data)
	e.ActorID = a.UserID
	return e
}

// UserQuery selects users: Email keeps those whose normalized email
// contains it.
type UserQuery struct {
	Email  string
	Limit  int // 0: DefaultPageSize
	Cursor string
}

// UserPage is one page of users, oldest first; Next is "" on the last page.
type UserPage struct {
	Users []User
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
	limit, err := pageSize(in.Limit)
	if err != nil {
		return UserPage{}, err
	}
	f := store.UserFilter{EmailContains: email, Limit: limit + 1}
	if in.Cursor != "" {
		at, id, err := decodeCursor(cursorUsers, in.Cursor)
		if err != nil {
			return UserPage{}, err
		}
		f.After = &store.UserCursor{CreatedAt: at, ID: id}
	}
	us, err := s.st.ListUsers(ctx, f)
	if err != nil {
		return UserPage{}, apperr.Internal(err)
	}
	page := UserPage{Users: us}
	if len(us) > limit {
		page.Users = us[:limit]
		last := page.Users[limit-1]
		page.Next = encodeCursor(cursorUsers, last.CreatedAt, last.ID)
	}
	return page, nil
}

// AdminUser returns one account.
func (s *Service) AdminUser(ctx context.Context, a Actor, id string) (User, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return User{}, err
	}
	u, err := s.st.UserByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return User{}, errNoSuchUser()
	}
	if err != nil {
		return User{}, apperr.Internal(err)
	}
	return u, nil
}

// AdminFindUser returns the account named by ref: an email when it holds an
// "@", else an id.
func (s *Service) AdminFindUser(ctx context.Context, a Actor, ref string) (User, error) {
	if !strings.Contains(ref, "@") {
		return s.AdminUser(ctx, a, ref)
	}
	if err := s.authorizeRead(ctx, a); err != nil {
		return User{}, err
	}
	u, err := s.st.UserByEmail(ctx, NormalizeEmail(ref))
	if errors.Is(err, store.ErrNotFound) {
		return User{}, errNoSuchUser()
	}
	if err != nil {
		return User{}, apperr.Internal(err)
	}
	return u, nil
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
func (s *Service) AdminUpdateUser(ctx context.Context, a Actor, id string, p UserPatch, m Meta) (User, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return User{}, err
	}
	if err := p.check(); err != nil {
		return User{}, err
	}
	now := s.clock()
	var after store.User
	err := s.st.InTx(ctx, func(q store.Queries) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
		if p.empty() {
			var err error
			after, err = q.UserByID(ctx, id)
			return err
		}
		before, updated, err := q.UpdateUser(ctx, id, store.UserChange{
			Status: p.Status, Role: p.Role, TenantID: p.TenantID, OrganizationID: p.OrganizationID,
		}, now)
		if err != nil {
			return err
		}
		after = updated
		if err := s.recordStatus(ctx, q, a, m, before, after, now); err != nil {
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
		return q.AppendAudit(ctx, s.adminEvent(EventUserUpdated, now, m, a, id, map[string]any{"changes": changes}))
	})
	if errors.Is(err, store.ErrNotFound) {
		return User{}, errNoSuchUser()
	}
	if err != nil {
		return User{}, asAppErr(err)
	}
	return after, nil
}

// recordStatus revokes the sessions of a disabled account and audits a
// change of status.
func (s *Service) recordStatus(ctx context.Context, q store.Queries, a Actor, m Meta, before, after store.User, now time.Time) error {
	if after.Status == store.StatusDisabled {
		// Also when it was disabled already: a session must not outlive
		// the operator's intent, however it came to exist.
		revoked, err := q.RevokeUserSessions(ctx, after.ID, "account_disabled", now)
		if err != nil {
			return err
		}
		switch {
		case before.Status != store.StatusDisabled:
			return q.AppendAudit(ctx, s.adminEvent(EventUserDisabled, now, m, a, after.ID, map[string]any{"revoked_sessions": len(revoked)}))
		case len(revoked) > 0:
			return q.AppendAudit(ctx, s.adminEvent(EventSessionRevoked, now, m, a, after.ID,
				map[string]any{"reason": "account_disabled", "revoked_sessions": len(revoked)}))
		}
		return nil
	}
	if before.Status != after.Status {
		return q.AppendAudit(ctx, s.adminEvent(EventUserEnabled, now, m, a, after.ID, nil))
	}
	return nil
}

// PageQuery is a page of a list: at most Limit entries after Cursor.
type PageQuery struct {
	Limit  int // 0: DefaultPageSize
	Cursor string
}

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
