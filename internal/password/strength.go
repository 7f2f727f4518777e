package password

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
)

// DefaultMinGuesses is the strength DefaultPolicy requires: zxcvbn's
// estimate of the guesses an attacker needs, at least 1e10 (zxcvbn score 4,
// "strong protection from an offline slow-hash attack"). Our hashes are
// argon2id, so a stolen database is exactly that attack; any random 12
// characters estimate at 1e12 or more, so the bar only refuses passwords the
// estimator finds structure in.
const DefaultMinGuesses = 1e10

// estimateRunes is how many runes, from the start, the strength estimate
// reads. zxcvbn's cost grows about with the cube of the length (its l33t
// matcher tries every substring under every substitution), so a 128-rune
// password could cost a second of CPU; 32 runes bound the worst case to
// about the cost of one argon2id hash (see BenchmarkEstimate) while covering
// the whole of nearly every password people choose. A password is at least
// as hard to guess as its beginning, so reading only the beginning never
// accepts a weak password; it can refuse a long one whose first 32 runes are
// weak on their own, and the message then says so.
const estimateRunes = 32

// estimateGuesses returns zxcvbn's estimate of the guesses needed for the
// first estimateRunes runes of pw, treating the email and its parts as words
// an attacker knows. Invalid UTF-8 estimates as 0.
func estimateGuesses(pw, email string) float64 {
	pw = prefixRunes(pw, estimateRunes)
	return zxcvbn.PasswordStrength(pw, userInputs(email)).Guesses
}

// prefixRunes returns the first n runes of s, or s when it is shorter.
func prefixRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// userInputs returns the words of email an attacker would try first: the
// whole address, its local part and domain, and every run of at least three
// letters or digits in it (ann.long@example.com gives ann, long, example,
// com).
func userInputs(email string) []string {
	e := strings.ToLower(Normalize(strings.TrimSpace(email)))
	if e == "" {
		return nil
	}
	in := []string{e}
	if at := strings.LastIndexByte(e, '@'); at >= 0 {
		in = append(in, e[:at], e[at+1:])
	}
	for _, part := range strings.FieldsFunc(e, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if utf8.RuneCountInString(part) >= 3 {
			in = append(in, part)
		}
	}
	return in
}
