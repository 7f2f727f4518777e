package webhook

import (
	"errors"
	"net/http"
)

// The errors Verify and VerifyStandard return, wrapped with detail; test
// them with errors.Is. None of them ever contains a secret or a signature.
var (
	// ErrMissingHeader means a required header is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrMalformedHeader means a header is present but unusable: a
	// timestamp that is not a non-negative decimal number of seconds, a
	// signature that is not the expected encoding or length, an event id
	// that is too long, or a header given more than once.
	ErrMalformedHeader = errors.New("webhook: malformed header")
	// ErrSignature means the headers are well formed but no signature
	// matches the body under any of the secrets.
	ErrSignature = errors.New("webhook: signature mismatch")
	// ErrTooOld means the signature is valid but the timestamp is more than
	// Tolerance in the past: a replay, or a sender whose clock is behind.
	ErrTooOld = errors.New("webhook: timestamp too old")
	// ErrTooNew means the signature is valid but the timestamp is more than
	// Tolerance in the future: a sender whose clock is ahead.
	ErrTooNew = errors.New("webhook: timestamp too far in the future")
	// ErrMalformedBody means the body of a seed-format delivery has no
	// usable "id" field (the Handler needs it to drop duplicates), or that
	// it disagrees with the Webhook-Id header.
	ErrMalformedBody = errors.New("webhook: malformed body")
	// ErrInvalidSecret means a Standard Webhooks secret is not "whsec_"
	// followed by standard base64, or a secret is empty.
	ErrInvalidSecret = errors.New("webhook: invalid secret")
)

// StatusOf returns the HTTP status a receiver should answer a refused
// delivery with: 401 for a signature that does not match, 400 for a stale
// or future timestamp and for missing or malformed headers or body, and
// 500 for anything else (a configuration or store error). It returns 200
// for a nil error.
func StatusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrSignature):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooOld), errors.Is(err, ErrTooNew),
		errors.Is(err, ErrMissingHeader), errors.Is(err, ErrMalformedHeader),
		errors.Is(err, ErrMalformedBody):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
