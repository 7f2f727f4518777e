package password

import (
	_ "embed"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/palisade-auth/palisade/internal/apperr"
)

// Normalize returns pw in Unicode NFKC, so that the same password typed on
// different keyboards or platforms hashes the same. Apply it before Check,
// Hash and Verify alike. A pw longer than MaxNormalized bytes comes back
// as it is.
func Normalize(pw string) string {
	if len(pw) > MaxNormalized {
		return pw
	}
	return norm.NFKC.String(pw)
}

// MaxNormalized is the longest input, in bytes, that Normalize normalizes:
// 16 bytes for each of the 128 characters the policy allows, room for any
// other spelling of an acceptable password (a Hangul syllable typed as its
// three jamo is 9 bytes, a full-width letter 3). A longer one has more
// than 128 characters however it is normalized, so it is refused as
// too_long or matches no stored hash either way, and normalizing it only
// costs: NFKC grows U+FDFA eighteen-fold, and a 63 KB password of it, which
// the body limit lets through, cost 21 ms of CPU before any length check
// and outside the hashing pool.
const MaxNormalized = 16 * 128

// Policy decides which new passwords are acceptable. It has no composition
// rules, following NIST SP 800-63B.
type Policy struct {
	MinLength int // in runes; 0 means no minimum
	MaxLength int // in runes; 0 means no maximum

	// Common holds refused passwords, lowercased and NFKC-normalized;
	// empty refuses none.
	Common SortedList

	// MinGuesses refuses a password whose estimated number of guesses
	// (zxcvbn, with the email's words as known to the attacker; see
	// estimateGuesses) is below it; 0 skips the estimate.
	MinGuesses float64
}

// DefaultPolicy returns the shipped policy: 12 to 128 characters, not on the
// common-password list, and at least DefaultMinGuesses estimated guesses.
func DefaultPolicy() Policy {
	return Policy{MinLength: 12, MaxLength: 128, Common: commonPasswords(), MinGuesses: DefaultMinGuesses}
}

// The field and codes of Check's errors.
const (
	fieldPassword   = "password"
	codeTooShort    = "too_short"
	codeTooLong     = "too_long"
	codeNotPrint    = "not_printable"
	codeCommon      = "common"
	codeEqualsEmail = "equals_email"
	codeTooWeak     = "too_weak"
)

// Check returns every rule the already normalized pw breaks, or nil. Length
// counts runes and a long password is refused, never truncated. The strength
// estimate runs only when every other rule passed, so too_weak is always the
// only reason and a refused password costs no estimate. Messages never quote
// the password. A server checks with Hasher.Check instead, which bounds the
// estimates running at once.
func (p Policy) Check(pw, email string) []apperr.FieldError {
	errs, _ := p.check(pw, email, func(estimate func()) error { estimate(); return nil })
	return errs
}

// check is Check with the strength estimate run by run, which may refuse
// to run it and return why.
func (p Policy) check(pw, email string, run func(estimate func()) error) ([]apperr.FieldError, error) {
	var errs []apperr.FieldError
	add := func(code, msg string) {
		errs = append(errs, apperr.FieldError{Field: fieldPassword, Code: code, Message: msg})
	}
	n := utf8.RuneCountInString(pw)
	if n < p.MinLength {
		add(codeTooShort, fmt.Sprintf("The password must be at least %d characters long.", p.MinLength))
	}
	if p.MaxLength > 0 && n > p.MaxLength {
		add(codeTooLong, fmt.Sprintf("The password must be at most %d characters long.", p.MaxLength))
	}
	if !printable(pw) {
		add(codeNotPrint, "The password may only contain printable characters and spaces.")
	}
	if p.Common.Contains(strings.ToLower(pw)) {
		add(codeCommon, "The password is too common; choose another one.")
	}
	if e := strings.TrimSpace(email); e != "" && strings.EqualFold(pw, e) {
		add(codeEqualsEmail, "The password must not be the email address.")
	}
	if len(errs) > 0 || p.MinGuesses <= 0 {
		return errs, nil
	}
	var weak bool
	if err := run(func() { weak = estimateGuesses(pw, email) < p.MinGuesses }); err != nil {
		return nil, err
	}
	if weak {
		judged := "The password is"
		if n > estimateRunes {
			judged = fmt.Sprintf("The first %d characters of the password are", estimateRunes)
		}
		add(codeTooWeak, judged+" too easy to guess; avoid your email address, repeated characters, "+
			"sequences and keyboard patterns, or use several unrelated words.")
	}
	return errs, nil
}

// printable reports whether s is valid UTF-8 made of printable runes and
// ASCII spaces. Invalid bytes would otherwise pass as U+FFFD.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

//go:embed common-passwords.txt
var commonText string

// commonPasswords returns the shipped list of refused passwords.
func commonPasswords() SortedList { return SortedList(commonText) }

// SortedList is a set of words, one per line, each line ending in a
// newline, the lines in strictly increasing byte order (LC_ALL=C sort -u).
// Contains searches it where it lies: the embedded list of 49,233
// passwords is searched in the executable's read-only data and costs no
// heap, where a map of it held 3 MiB for the life of the process from the
// first registration on (a tenth of the memory the issuer keeps for
// everything besides hashing under a login flood).
type SortedList string

// Contains reports whether w is one of l's lines, by binary search over
// l's bytes: each step takes the line around the midpoint.
func (l SortedList) Contains(w string) bool {
	s := string(l)
	lo, hi := 0, len(s) // w can only be a line starting in [lo, hi); lo starts a line
	for lo < hi {
		mid := lo + (hi-lo)/2
		start := strings.LastIndexByte(s[:mid], '\n') + 1 // >= lo, as lo starts a line
		end := start + strings.IndexByte(s[start:], '\n')
		if end < start { // no final newline
			end = len(s)
		}
		switch line := s[start:end]; {
		case line == w:
			return true
		case line < w:
			lo = end + 1
		default:
			hi = start
		}
	}
	return false
}
