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

// LoadKEKFile reads the key-encryption key from path.
func LoadKEKFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: read key-encryption key: %w", err)
	}
	return ParseKEK(b)
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

// Sealer encrypts private key material at rest with AES-256-GCM under the
// key-encryption key, binding each ciphertext to its context (the kid) so a
// row copied onto another key's row does not open.
type Sealer struct {
	aead cipher.AEAD
	kek  []byte
	rand io.Reader
}

// NewSealer returns a Sealer for kek. rand supplies nonces.
func NewSealer(kek []byte, rand io.Reader) (*Sealer, error) {
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
	return &Sealer{aead: aead, kek: append([]byte(nil), kek...), rand: rand}, nil
}

// Seal encrypts plain, bound to context. The output is nonce || ciphertext.
func (s *Sealer) Seal(plain []byte, context string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("keys: nonce: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plain, []byte(context)), nil
}

// Open decrypts what Seal produced for the same context.
func (s *Sealer) Open(sealed []byte, context string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, ErrSealed
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(context))
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}

// DeriveSecret returns a 32-byte secret for one purpose, derived from the
// key-encryption key with HKDF-SHA256, so that one mounted secret serves
// several uses without any of them revealing another.
func (s *Sealer) DeriveSecret(purpose string) []byte {
	out := make([]byte, 32)
	r := hkdf.New(sha256.New, s.kek, nil, []byte("palisade/"+purpose))
	if _, err := io.ReadFull(r, out); err != nil {
		// HKDF-SHA256 yields up to 255*32 bytes; 32 cannot fail.
		panic(err)
	}
	return out
}
