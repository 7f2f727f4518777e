package verify

import (
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The algorithms a Config may allow. Nothing else is ever accepted.
const (
	algRS256 = "RS256"
	algHS256 = "HS256"
)

// compact is a token split into its parts. All slices point into one
// buffer allocated per token.
type compact struct {
	signingInput []byte // "header.payload", what the signature covers
	header       []byte
	payload      []byte
	signature    []byte
}

// splitCompact splits and decodes a compact JWS (RFC 7515 section 7.1).
// It allocates once: the decoded parts and a copy of the signing input
// share one buffer, so hashing needs no string conversion.
func splitCompact(token string) (compact, *Error) {
	i := strings.IndexByte(token, '.')
	if i < 0 {
		return compact{}, fail(ReasonMalformed, "not three segments")
	}
	j := strings.IndexByte(token[i+1:], '.')
	if j < 0 {
		return compact{}, fail(ReasonMalformed, "not three segments")
	}
	j += i + 1
	if strings.IndexByte(token[j+1:], '.') >= 0 {
		return compact{}, fail(ReasonMalformed, "more than three segments")
	}
	h, p, s := token[:i], token[i+1:j], token[j+1:]
	if h == "" || p == "" || s == "" {
		return compact{}, fail(ReasonMalformed, "empty segment")
	}
	hl, ok1 := decodedLen(len(h))
	pl, ok2 := decodedLen(len(p))
	sl, ok3 := decodedLen(len(s))
	if !ok1 || !ok2 || !ok3 {
		return compact{}, fail(ReasonMalformed, "segment length is not valid base64url")
	}
	buf := make([]byte, j+hl+pl+sl)
	var c compact
	c.signingInput = buf[:j:j]
	copy(c.signingInput, token[:j])
	c.header = buf[j : j+hl : j+hl]
	c.payload = buf[j+hl : j+hl+pl : j+hl+pl]
	c.signature = buf[j+hl+pl:]
	if !decodeSegment(c.header, h) {
		return compact{}, fail(ReasonMalformed, "header is not strict base64url")
	}
	if !decodeSegment(c.payload, p) {
		return compact{}, fail(ReasonMalformed, "payload is not strict base64url")
	}
	if !decodeSegment(c.signature, s) {
		return compact{}, fail(ReasonMalformed, "signature is not strict base64url")
	}
	return c, nil
}

// b64 maps a base64url character (RFC 4648 section 5) to its value, and
// every other byte to 0xFF. The encoding/base64 decoder is not used because
// it skips CR and LF, and a token with a line break in it is not one.
var b64 = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// decodedLen returns the decoded length of n unpadded base64url characters;
// a remainder of one character cannot encode anything.
func decodedLen(n int) (int, bool) {
	switch n % 4 {
	case 0:
		return n / 4 * 3, true
	case 2:
		return n/4*3 + 1, true
	case 3:
		return n/4*3 + 2, true
	}
	return 0, false
}

// decodeSegment decodes s into dst, which has exactly decodedLen(len(s))
// bytes. It is strict: no padding, nothing outside the alphabet, and the
// unused low bits of the last character must be zero, so every byte string
// has exactly one accepted encoding.
func decodeSegment(dst []byte, s string) bool {
	di, si := 0, 0
	for ; si+4 <= len(s); si += 4 {
		a, b, c, d := b64[s[si]], b64[s[si+1]], b64[s[si+2]], b64[s[si+3]]
		if (a|b|c|d)&0x80 != 0 {
			return false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		dst[di], dst[di+1], dst[di+2] = byte(v>>16), byte(v>>8), byte(v)
		di += 3
	}
	switch len(s) - si {
	case 0:
		return true
	case 2:
		a, b := b64[s[si]], b64[s[si+1]]
		if (a|b)&0x80 != 0 || b&0x0F != 0 {
			return false
		}
		dst[di] = a<<2 | b>>4
		return true
	case 3:
		a, b, c := b64[s[si]], b64[s[si+1]], b64[s[si+2]]
		if (a|b|c)&0x80 != 0 || c&0x03 != 0 {
			return false
		}
		v := uint32(a)<<12 | uint32(b)<<6 | uint32(c)
		dst[di], dst[di+1] = byte(v>>10), byte(v>>2)
		return true
	}
	return false
}

// joseHeader is the header reduced to the three parameters allowed. The
// byte slices point into the decoded header.
type joseHeader struct {
	alg, typ, kid          []byte
	hasAlg, hasTyp, hasKid bool
}

// parseHeader reads the JOSE header. It is a small dedicated parser rather
// than encoding/json because it must refuse duplicate names (RFC 7515
// section 4 allows either refusing or taking the last; refusing leaves no
// room for two parsers to disagree) and because every header parameter
// except alg, typ and kid is refused anyway (RFC 8725 section 3.1: jku, jwk,
// x5u and x5c would let the token choose its own key; crit names extensions
// this verifier does not understand), so only string values need parsing.
// It does not allocate unless a value contains escapes.
func parseHeader(b []byte) (joseHeader, *Error) {
	var h joseHeader
	s := scanner{b: b}
	s.ws()
	if !s.consume('{') {
		return h, fail(ReasonMalformed, "header is not a JSON object")
	}
	s.ws()
	if s.consume('}') {
		return h, s.end()
	}
	for {
		s.ws()
		name, err := s.str()
		if err != nil {
			return h, fail(ReasonMalformed, "header: %w", err)
		}
		var val *[]byte
		var seen *bool
		switch string(name) {
		case "alg":
			val, seen = &h.alg, &h.hasAlg
		case "typ":
			val, seen = &h.typ, &h.hasTyp
		case "kid":
			val, seen = &h.kid, &h.hasKid
		default:
			return h, fail(ReasonHeader, "header parameter %s not allowed", quoteParam(string(name)))
		}
		if *seen {
			return h, fail(ReasonHeader, "duplicate header parameter %s", string(name))
		}
		*seen = true
		s.ws()
		if !s.consume(':') {
			return h, fail(ReasonMalformed, "header: expected colon")
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return h, fail(ReasonHeader, "header parameter %s is not a string", string(name))
		}
		if *val, err = s.str(); err != nil {
			return h, fail(ReasonMalformed, "header: %w", err)
		}
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return h, s.end()
		}
		return h, fail(ReasonMalformed, "header: expected comma or closing brace")
	}
}

// scanner reads JSON strings and structure from a byte slice.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end checks that only whitespace follows the value.
func (s *scanner) end() *Error {
	s.ws()
	if s.i != len(s.b) {
		return fail(ReasonMalformed, "header: data after the JSON object")
	}
	return nil
}

var (
	errString     = errors.New("invalid JSON string")
	errStringUTF8 = errors.New("JSON string is not valid UTF-8")
)

// str reads a JSON string (RFC 8259 section 7) and returns its value: a
// subslice of the input when it has no escapes, else a fresh copy. Invalid
// UTF-8 and lone surrogates are refused, not replaced, so no two different
// inputs read as the same name.
func (s *scanner) str() ([]byte, error) {
	if !s.consume('"') {
		return nil, errString
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				return nil, errStringUTF8
			}
			return v, nil
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return nil, errString
		}
		s.i++
	}
	return nil, errString
}

// strEscaped finishes a string that has an escape at s.i.
func (s *scanner) strEscaped(start int) ([]byte, error) {
	out := make([]byte, 0, s.i-start+16)
	out = append(out, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				return nil, errStringUTF8
			}
			return out, nil
		case c < 0x20:
			return nil, errString
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			return nil, errString
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, errString
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || !s.consume('\\') || !s.consume('u') {
					return nil, errString
				}
				r2, ok := s.hex4()
				if !ok {
					return nil, errString
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, errString
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, errString
		}
	}
	return nil, errString
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}
