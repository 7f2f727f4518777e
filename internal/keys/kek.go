package keys

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/hkdf"
)

// KEKSize is the size of the key-encryption key: AES-256.
const KEKSize = 32

// ErrSealed means a sealed value could not be opened: a wrong
// key-encryption key or a tampered database row.
var ErrSealed = errors.New("keys: sealed value cannot be opened")

// ParseKEK reads a key-encryption key in any of the forms an operator is
// likely to mount: base64 (standard or URL alphabet, padded or not), hex, or
// the raw 32 bytes. Surrounding white space is ignored.
func ParseKEK(b []byte) ([]byte, error) {
	// Raw bytes only when they cannot be text: a 32-character passphrase
	// or the hex of a 16-byte key must not pass for a 256-bit key.
	if len(b) == KEKSize && !printable(b) {
		return append([]byte(nil), b...), nil
	}
	s := strings.TrimSpace(string(b))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KEKSize {
			return k, nil
		}
	}
	if k, err := hex.DecodeString(s); err == nil && len(k) == KEKSize {
		return k, nil
	}
	return nil, fmt.Errorf("keys: key-encryption key must be %d bytes (base64, hex or raw)", KEKSize)
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// ParseKEKs reads a key-encryption key file: one key per line, newest
// first, each in any form ParseKEK accepts; blank lines and lines starting
// with # are skipped. 32 raw bytes are one key. Several lines let the key
// be rotated: secrets are sealed with the first and opened with any.
func ParseKEKs(b []byte) ([][]byte, error) {
	if len(b) == KEKSize && !printable(b) {
		return [][]byte{append([]byte(nil), b...)}, nil
	}
	var out [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKEK([]byte(line))
		if err != nil {
			// Never echo the line: it may be a key with a typo.
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("keys: key-encryption key file holds no key (one base64 key of %d bytes per line)", KEKSize)
	}
	return out, nil
}

// LoadKEKFile reads the key-encryption keys from path, newest first.
func LoadKEKFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: read key-encryption key: %w", err)
	}
	return ParseKEKs(b)
}

// GenerateKEKFile creates path (and its directory) with a new random
// key-encryption key in base64, readable only by the owner. It refuses to
// overwrite an existing file, so two processes racing to create it cannot
// end up with different keys.
func GenerateKEKFile(path string, rand io.Reader) ([]byte, error) {
	k := make([]byte, KEKSize)
	if _, err := io.ReadFull(rand, k); err != nil {
		return nil, fmt.Errorf("keys: generate key-encryption key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("keys: create key-encryption key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("keys: create key-encryption key file: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("keys: write key-encryption key file: %w", werr)
	}
	return k, nil
}

// Sealer encrypts secrets at rest with AES-256-GCM under the
// key-encryption key, binding each ciphertext to its context (a kid, a mail
// id, a webhook endpoint id) so a value copied onto another row does not
// open. It may hold several keys, newest first: it seals with the newest
// and opens with any, so the key can be rotated without downtime.
type Sealer struct {
	aeads []cipher.AEAD // newest first
	kek   []byte        // the newest
	rand  io.Reader
}

// NewSealer returns a Sealer for kek. rand supplies nonces.
func NewSealer(kek []byte, rand io.Reader) (*Sealer, error) {
	return NewKeyring([][]byte{kek}, rand)
}

// NewKeyring returns a Sealer over keks, newest first: it seals with
// keks[0] and opens what any of them sealed.
func NewKeyring(keks [][]byte, rand io.Reader) (*Sealer, error) {
	if len(keks) == 0 {
		return nil, errors.New("keys: no key-encryption key")
	}
	s := &Sealer{kek: append([]byte(nil), keks[0]...), rand: rand}
	for _, kek := range keks {
		if len(kek) != KEKSize {
			return nil, fmt.Errorf("keys: key-encryption key must be %d bytes", KEKSize)
		}
		block, err := aes.NewCipher(kek)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// Seal encrypts plain with the newest key, bound to context. The output is
// nonce || ciphertext.
func (s *Sealer) Seal(plain []byte, context string) ([]byte, error) {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("keys: nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, []byte(context)), nil
}

// Open decrypts what Seal produced for the same context under any of the
// keys.
func (s *Sealer) Open(sealed []byte, context string) ([]byte, error) {
	plain, _, err := s.open(sealed, context)
	return plain, err
}

// open also reports which key opened it (0 is the newest).
func (s *Sealer) open(sealed []byte, context string) ([]byte, int, error) {
	for i, aead := range s.aeads {
		n := aead.NonceSize()
		if len(sealed) < n+aead.Overhead() {
			return nil, 0, ErrSealed
		}
		if plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(context)); err == nil {
			return plain, i, nil
		}
	}
	return nil, 0, ErrSealed
}

// Reseal returns sealed re-sealed under the newest key, and whether that
// changed anything: a value the newest key sealed already is returned as
// it is. ErrSealed when no key opens it.
func (s *Sealer) Reseal(sealed []byte, context string) ([]byte, bool, error) {
	plain, i, err := s.open(sealed, context)
	if err != nil {
		return nil, false, err
	}
	if i == 0 {
		return sealed, false, nil
	}
	out, err := s.Seal(plain, context)
	return out, err == nil, err
}

// DeriveSecret returns a 32-byte secret for one purpose, derived from the
// newest key-encryption key with HKDF-SHA256, so that one mounted secret
// serves several uses without any of them revealing another. A new first
// line in the key file changes every derived secret (a key rotated out
// because it leaked must stop counting at once).
func (s *Sealer) DeriveSecret(purpose string) []byte {
	out := make([]byte, 32)
	r := hkdf.New(sha256.New, s.kek, nil, []byte("palisade/"+purpose))
	if _, err := io.ReadFull(r, out); err != nil {
		// HKDF-SHA256 yields up to 255*32 bytes; 32 cannot fail.
		panic(err)
	}
	return out
}
