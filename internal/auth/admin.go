package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// RoleAdmin may manage accounts and read the audit trail.
const RoleAdmin = "admin"

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
// must not keep reading accounts, sessions and the audit trail. Writes on
// an account call it too, before the account's lock, so that such an admin
// gets forbidden rather than the not_found of an unknown account.
func (s *Service) authorizeRead(ctx context.Context, a Actor) error {
	if err := authorizeWrite(ctx, s.st, a); err != nil {
		return asAppErr(err)
	}
	return nil
}

// userReader reads an account: store.Queries, or a store.UserTx, whose
// transaction a write on another account runs in.
type userReader interface {
	UserByID(ctx context.Context, id string) (store.User, error)
}

// adminTx runs fn in one transaction that first re-reads the acting admin
// (authorizeWrite): an admin demoted or disabled since the token was
// issued writes nothing, and the check and the write see the same state.
func (s *Service) adminTx(ctx context.Context, a Actor, fn func(q store.Queries) error) error {
	return s.st.InTx(ctx, func(q store.Queries) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
		return fn(q)
	})
}

// authorizeWrite re-reads the acting admin inside the write's transaction:
// an admin demoted or disabled since their access token was minted (it lives
// up to its TTL) must not keep the power to change accounts.
func authorizeWrite(ctx context.Context, q userReader, a Actor) error {
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
