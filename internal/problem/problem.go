// Package problem owns the wire form of every error response: RFC 9457
// problem details as the API contract defines them, with a stable
// machine-readable code beside the standard members.
package problem

import (
	"encoding/json"
	"net/http"

	"github.com/palisade-auth/palisade/internal/apperr"
)

// ContentType is the media type of a problem details body.
const ContentType = "application/problem+json"

// FieldError is one broken rule of one input field, listed under "errors".
type FieldError = apperr.FieldError

// Problem is an RFC 9457 problem details object plus the contract's "code"
// member. Type and Title may be left empty; Write fills the defaults.
type Problem struct {
	Type   string       `json:"type"`  // "about:blank" unless a more specific URI is given
	Title  string       `json:"title"` // http.StatusText(Status) by default
	Status int          `json:"status"`
	Code   string       `json:"code"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// Internal returns the problem for a fault of ours. It says nothing about the
// cause, because a 500 must never leak internals.
func Internal() Problem {
	return Problem{Status: http.StatusInternalServerError, Code: "internal_error", Detail: "An internal error occurred."}
}

// Write sends p as the response: the status, a problem+json body and headers
// that keep the body out of caches and away from content sniffing. A zero
// Status is sent as 500, since an error without a status is still a fault.
// Headers the caller set before (Retry-After, WWW-Authenticate) are kept.
func Write(w http.ResponseWriter, p Problem) {
	if p.Status == 0 {
		p.Status = http.StatusInternalServerError
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	// Marshalling strings, ints and a slice of string structs cannot fail, and
	// encoding before writing the header means a failure could never leave a
	// half-written response anyway.
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500,"code":"internal_error"}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
