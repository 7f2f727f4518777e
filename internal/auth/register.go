package auth

import (
	"context"
	"errors"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
)

const (
	maxEmailLen = 254 // RFC 5321 path limit
	maxNameLen  = 200
)

// RegisterInput is a registration request.
type RegisterInput struct {
	Email    string
	Password string
	Name     string
	// Role is set by operators (issuer users create); self-registration
	// always gets RoleUser.
	Role string
}

// NormalizeEmail is the form emails are compared in: NFKC, trimmed,
// lower-cased. Provider-specific rewriting (dots, plus tags) is not applied:
// those are distinct mailboxes elsewhere.
//
// An email longer than maxEmailInput bytes comes back as it is: its NFKC
// form could cost tens of milliseconds of CPU (see password.MaxNormalized)
// on every login or reset request that names it, before any limit; and no
// registered email (at most maxEmailLen bytes) has a spelling that long
// other than, for the rare one that NFKC expands, its normal form itself.
func NormalizeEmail(email string) string {
	if len(email) > maxEmailInput {
		return email
	}
	return strings.ToLower(strings.TrimSpace(norm.NFKC.String(email)))
}

// maxEmailInput is the longest email NormalizeEmail normalizes: four bytes
// for each of the maxEmailLen a registered email may have, room for every
// wider spelling of one (a full-width letter is 3 bytes).
const maxEmailInput = 4 * maxEmailLen

func validEmail(email string) bool {
	if email == "" || len(email) > maxEmailLen || !utf8.ValidString(email) {
		return false
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Name != "" || a.Address != email {
		return false
	}
	at := strings.LastIndexByte(email, '@')
	return at > 0 && at < len(email)-1
}

func validText(s string, max int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Register creates an account. Policy failures come back as one error
// listing every broken rule.
func (s *Service) Register(ctx context.Context, in RegisterInput, m Meta) (Account, error) {
	email := strings.TrimSpace(in.Email)
	pw := password.Normalize(in.Password)
	var fields []apperr.FieldError
	switch {
	case email == "":
		fields = append(fields, apperr.FieldError{Field: "email", Code: "required", Message: "An email address is required."})
	case !validEmail(email):
		fields = append(fields, apperr.FieldError{Field: "email", Code: "invalid", Message: "The email address is not valid."})
	}
	if in.Password == "" {
		fields = append(fields, apperr.FieldError{Field: "password", Code: "required", Message: "A password is required."})
	} else {
		pwFields, err := s.hasher.Check(ctx, s.policy, pw, email)
		if err != nil {
			return Account{}, hashErr(err)
		}
		fields = append(fields, pwFields...)
	}
	name := strings.TrimSpace(in.Name)
	if !validText(name, maxNameLen) {
		fields = append(fields, apperr.FieldError{Field: "name", Code: "invalid", Message: "The name must be at most 200 printable characters."})
	}
	if len(fields) > 0 {
		e := apperr.New(apperr.KindInvalid, "validation_failed", "The request is not valid.")
		e.Fields = fields
		return Account{}, e
	}
	role := in.Role
	if role == "" {
		role = RoleUser
	}
	hash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		return Account{}, hashErr(err)
	}
	now := s.clock()
	u := store.User{
		ID: s.newID(), Email: email, EmailNormalized: NormalizeEmail(email), PasswordHash: hash,
		Name: name, Role: role, Status: store.StatusEnabled, CreatedAt: now, UpdatedAt: now,
	}
	err = s.st.InTx(ctx, func(q store.Queries) error {
		if err := q.CreateUser(ctx, u); err != nil {
			return err
		}
		if err := s.queueLink(ctx, q, u, store.PurposeVerifyEmail, s.cfg.VerifyTokenTTL, now); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.event(EventUserRegistered, now, m, u.ID, "", nil))
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return Account{}, apperr.New(apperr.KindConflict, "email_already_registered", "An account with this email already exists.")
	}
	if err != nil {
		return Account{}, apperr.Internal(err)
	}
	s.mailQueued()
	return accountOf(u), nil
}

// Me returns the account of the authenticated user.
func (s *Service) Me(ctx context.Context, userID string) (Account, error) {
	u, err := s.st.UserByID(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return Account{}, apperr.New(apperr.KindNotFound, "not_found", "The account does not exist.")
	}
	if err != nil {
		return Account{}, apperr.Internal(err)
	}
	return accountOf(u), nil
}
