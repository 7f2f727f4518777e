// Package apperr owns the typed error of the domain layer: a kind that the
// transport maps to a status in exactly one table, a public code and message
// that may be shown to clients, and a wrapped cause that only goes to the log.
package apperr

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the transport. The domain picks the kind; it
// never picks an HTTP status.
type Kind int

// The kinds. Each binary's error table maps them to statuses.
const (
	KindInternal         Kind = iota // a fault of ours; details never leave the process
	KindMalformed                    // the request could not be read
	KindInvalid                      // well-formed input that breaks a rule the client must fix before creating something
	KindUnprocessable                // well-formed input that breaks a rule of an action on existing state
	KindUnauthenticated              // credentials or token missing, wrong or expired
	KindForbidden                    // authenticated but not allowed
	KindNotFound                     // no such resource (for this caller)
	KindConflict                     // the resource already exists or is in use
	KindRateLimited                  // too many requests
	KindUnavailable                  // a dependency is down or we shed load
	KindTooLarge                     // the request body is over the limit
	KindUnsupportedMedia             // the request body is not of an accepted media type
	KindTimeout                      // the client did not send its request in time
)

// FieldError is one broken rule of one input field.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is the domain's error. Code and Message are public; Err is not.
type Error struct {
	Kind    Kind
	Code    string       // stable, machine-readable, e.g. "invalid_credentials"
	Message string       // public, human-readable
	Fields  []FieldError // validation details, public
	Err     error        // the cause; logged, never shown
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	return e.Code
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind k with a public code and message.
func New(k Kind, code, message string) *Error {
	return &Error{Kind: k, Code: code, Message: message}
}

// Wrap returns an error of kind k whose cause is err.
func Wrap(k Kind, code, message string, err error) *Error {
	return &Error{Kind: k, Code: code, Message: message, Err: err}
}

// Internal wraps an unexpected failure. The cause is kept for the log; the
// client only ever sees a generic message.
func Internal(err error) *Error {
	return &Error{Kind: KindInternal, Code: "internal_error", Message: "An internal error occurred.", Err: err}
}

// Unavailable wraps the failure of a dependency the request could not do
// without (the database cannot be reached): a condition of the moment that
// the client answers by retrying later, neither its fault nor a bug of ours.
func Unavailable(err error) *Error {
	return &Error{Kind: KindUnavailable, Code: "unavailable", Message: "The service is temporarily unavailable; retry shortly.", Err: err}
}

// As returns the *Error in err's chain, or an internal error wrapping err when
// there is none, so that every error has a kind.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// Is reports whether err carries the public code.
func Is(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
