// Package text is the issuer's one rule for what it can store as text.
// PostgreSQL's text and jsonb refuse U+0000 and invalid UTF-8, and a
// statement they fail is a server error, so everything a client or an
// operator sends is held to Storable where it enters: the HTTP request's
// URL and body, the command line's flags and arguments. Headers that are
// kept (the User-Agent) are made storable with Clean instead: they are the
// client's bytes, not its request.
package text

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/palisade-auth/palisade/internal/apperr"
)

// Storable reports whether s is valid UTF-8 without NUL.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Check is nil when s is storable, else a malformed_request naming field.
func Check(field, s string) error {
	if Storable(s) {
		return nil
	}
	e := apperr.New(apperr.KindMalformed, "malformed_request", "The request is not valid.")
	e.Fields = []apperr.FieldError{{Field: field, Code: "invalid", Message: "This field must be UTF-8 text without NUL characters."}}
	return e
}

// Clean is s made storable and printable: invalid sequences become U+FFFD
// and control characters are dropped.
func Clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
