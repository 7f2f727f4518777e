package password

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/palisade-auth/palisade/internal/argon2"
)

// b64 is the reference implementation's encoding; Strict refuses
// non-canonical trailing bits so one hash has one spelling.
var b64 = base64.RawStdEncoding.Strict()

func encodePHC(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// parsePHC reads an argon2id PHC string and refuses parameters outside l.
// Every error wraps ErrMalformedHash.
func (l limits) parsePHC(s string) (Params, []byte, []byte, error) {
	var p Params
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, fmt.Errorf("%w: not an argon2id PHC string", ErrMalformedHash)
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, fmt.Errorf("%w: unsupported argon2 version", ErrMalformedHash)
	}
	m, rest, ok1 := strings.Cut(parts[3], ",")
	t, th, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 {
		return p, nil, nil, fmt.Errorf("%w: bad parameter list", ErrMalformedHash)
	}
	mem, err1 := parseParam(m, "m=", 32)
	tim, err2 := parseParam(t, "t=", 32)
	thr, err3 := parseParam(th, "p=", 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return p, nil, nil, fmt.Errorf("%w: bad parameter list", ErrMalformedHash)
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return p, nil, nil, fmt.Errorf("%w: salt: %w", ErrMalformedHash, err)
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil {
		return p, nil, nil, fmt.Errorf("%w: key: %w", ErrMalformedHash, err)
	}
	p = Params{Memory: uint32(mem), Time: uint32(tim), Threads: uint8(thr), SaltLen: uint32(len(salt)), KeyLen: uint32(len(key))}
	if err := l.check(p); err != nil {
		return Params{}, nil, nil, fmt.Errorf("%w: %w", ErrMalformedHash, err)
	}
	return p, salt, key, nil
}

func parseParam(s, prefix string, bits int) (uint64, error) {
	v, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, fmt.Errorf("want %s", prefix)
	}
	return strconv.ParseUint(v, 10, bits)
}

// check reports whether p is within l. The lower bounds keep argon2 from
// panicking (time and threads of zero) and refuse toy salts and keys.
func (l limits) check(p Params) error {
	switch {
	case p.Time < 1 || p.Time > l.maxTime:
		return fmt.Errorf("time %d outside [1, %d]", p.Time, l.maxTime)
	case p.Threads < 1:
		return fmt.Errorf("threads must be at least 1")
	case p.Memory < 8*uint32(p.Threads) || p.Memory > l.maxMemory:
		return fmt.Errorf("memory %d KiB outside [%d, %d]", p.Memory, 8*uint32(p.Threads), l.maxMemory)
	case int64(p.SaltLen) < int64(l.minSaltLen) || int64(p.SaltLen) > int64(l.maxSaltLen):
		return fmt.Errorf("salt length %d outside [%d, %d]", p.SaltLen, l.minSaltLen, l.maxSaltLen)
	case int64(p.KeyLen) < int64(l.minKeyLen) || int64(p.KeyLen) > int64(l.maxKeyLen):
		return fmt.Errorf("key length %d outside [%d, %d]", p.KeyLen, l.minKeyLen, l.maxKeyLen)
	}
	return nil
}

func isBcryptPrefix(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// bcryptAlphabet is bcrypt's own base64 alphabet.
const bcryptAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// checkBcrypt validates the shape $2x$NN$ + 53 characters and the cost
// before any work is done: a cost of 31 would run for days.
func (l limits) checkBcrypt(s string) error {
	if len(s) != 60 || s[6] != '$' {
		return fmt.Errorf("%w: bcrypt: bad shape", ErrMalformedHash)
	}
	if s[4] < '0' || s[4] > '9' || s[5] < '0' || s[5] > '9' {
		return fmt.Errorf("%w: bcrypt: bad cost", ErrMalformedHash)
	}
	cost := int(s[4]-'0')*10 + int(s[5]-'0')
	if cost < bcrypt.MinCost || cost > l.maxBcryptCost {
		return fmt.Errorf("%w: bcrypt: cost %d outside [%d, %d]", ErrMalformedHash, cost, bcrypt.MinCost, l.maxBcryptCost)
	}
	for i := 7; i < len(s); i++ {
		if !strings.ContainsRune(bcryptAlphabet, rune(s[i])) {
			return fmt.Errorf("%w: bcrypt: bad character", ErrMalformedHash)
		}
	}
	return nil
}
