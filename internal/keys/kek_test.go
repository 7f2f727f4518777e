package keys_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/keys"
)

// testKEK returns a fresh random key-encryption key.
func testKEK(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, keys.KEKSize)
	if _, err := io.ReadFull(rand.Reader, k); err != nil {
		t.Fatal(err)
	}
	return k
}

func newSealer(t *testing.T, kek []byte) *keys.Sealer {
	t.Helper()
	s, err := keys.NewSealer(kek, rand.Reader)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

func TestParseKEK(t *testing.T) {
	k := testKEK(t)
	std := base64.StdEncoding.EncodeToString(k)
	accept := []struct {
		name string
		in   string
	}{
		{"std", std},
		{"std newline", std + "\n"},
		{"std crlf and spaces", "  " + std + "\r\n"},
		{"raw std", base64.RawStdEncoding.EncodeToString(k)},
		{"url", base64.URLEncoding.EncodeToString(k)},
		{"raw url", base64.RawURLEncoding.EncodeToString(k)},
		{"hex", hex.EncodeToString(k) + "\n"},
		{"raw bytes", string(k)},
	}
	for _, tc := range accept {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			got, err := keys.ParseKEK([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseKEK(%q) error %v, want nil", tc.in, err)
			}
			if !bytes.Equal(got, k) {
				t.Errorf("ParseKEK(%q) = %x, want %x", tc.in, got, k)
			}
		})
	}

	refuse := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"blank", " \n"},
		{"base64 31 bytes", base64.StdEncoding.EncodeToString(k[:31]) + "\n"},
		{"base64 33 bytes", base64.StdEncoding.EncodeToString(append(k, 0)) + "\n"},
		{"base64 16 bytes", base64.StdEncoding.EncodeToString(k[:16])},
		{"base64 64 bytes", base64.StdEncoding.EncodeToString(append(k, k...))},
		{"hex 31 bytes", hex.EncodeToString(k[:31])},
		{"raw 31 bytes", string(k[:31])},
		{"raw 33 bytes", string(append(k, 1))},
		{"garbage", "this is not a key-encryption key at all!\n"},
		{"base64 with junk", std[:40] + "!!!!"},
	}
	for _, tc := range refuse {
		t.Run("refuse/"+tc.name, func(t *testing.T) {
			if got, err := keys.ParseKEK([]byte(tc.in)); err == nil {
				t.Errorf("ParseKEK(%q) = %x, want error", tc.in, got)
			}
		})
	}
}

// TestParseKEKAmbiguousText checks that 32 characters of text are never
// taken for 32 raw key bytes.
func TestParseKEKAmbiguousText(t *testing.T) {
	short := hex.EncodeToString(testKEK(t)[:16]) // 32 characters, 128 bits
	if got, err := keys.ParseKEK([]byte(short)); err == nil {
		t.Errorf("ParseKEK(%q) = %x, want error (hex of 16 bytes)", short, got)
	}
}

func TestLoadKEKFile(t *testing.T) {
	k := testKEK(t)
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := keys.LoadKEKFile(path)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], k) {
		t.Errorf("LoadKEKFile(%s) = %x, %v, want [%x], nil", path, got, err, k)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := keys.LoadKEKFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadKEKFile(%s) error %v, want fs.ErrNotExist", missing, err)
	}
}

func TestGenerateKEKFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets", "kek") // the directory is created too
	k, err := keys.GenerateKEKFile(path, rand.Reader)
	if err != nil {
		t.Fatalf("GenerateKEKFile(%s): %v", path, err)
	}
	if len(k) != keys.KEKSize {
		t.Fatalf("GenerateKEKFile returned %d bytes, want %d", len(k), keys.KEKSize)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("GenerateKEKFile mode = %v, want 0600", got)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.StdEncoding.EncodeToString(k) + "\n"; string(content) != want {
		t.Errorf("GenerateKEKFile content = %q, want base64 of the key and a newline", content)
	}
	if loaded, err := keys.LoadKEKFile(path); err != nil || len(loaded) != 1 || !bytes.Equal(loaded[0], k) {
		t.Errorf("LoadKEKFile after GenerateKEKFile = %x, %v, want %x, nil", loaded, err, k)
	}

	t.Run("refuses to overwrite", func(t *testing.T) {
		k2, err := keys.GenerateKEKFile(path, rand.Reader)
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("GenerateKEKFile(existing) = %x, %v, want fs.ErrExist", k2, err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(after, content) {
			t.Errorf("GenerateKEKFile(existing) changed the file")
		}
	})

	t.Run("random failure creates nothing", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "kek")
		if _, err := keys.GenerateKEKFile(p, strings.NewReader("short")); err == nil {
			t.Fatalf("GenerateKEKFile with a short random source succeeded")
		}
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("GenerateKEKFile with a failed random source left %s (stat error %v)", p, err)
		}
	})
}

func TestNewSealerKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := keys.NewSealer(make([]byte, n), rand.Reader); err == nil {
			t.Errorf("NewSealer(%d-byte key) succeeded, want error", n)
		}
	}
}

func TestSealerRoundTrip(t *testing.T) {
	s := newSealer(t, testKEK(t))
	for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("private key "), 200)} {
		sealed, err := s.Seal(plain, "kid-a")
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if len(plain) > 8 && bytes.Contains(sealed, plain[:8]) {
			t.Errorf("Seal output contains the plaintext")
		}
		got, err := s.Open(sealed, "kid-a")
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Open(Seal(%d bytes)) = %d bytes, %v, want the plaintext", len(plain), len(got), err)
		}
	}

	a, _ := s.Seal([]byte("same"), "kid-a")
	b, _ := s.Seal([]byte("same"), "kid-a")
	if bytes.Equal(a, b) {
		t.Errorf("Seal twice gave the same output; nonces must be fresh")
	}

	broken, err := keys.NewSealer(testKEK(t), strings.NewReader("")) // no nonce material
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Seal([]byte("x"), "kid-a"); err == nil {
		t.Errorf("Seal with an empty random source succeeded")
	}
}

func TestSealerOpenRefuses(t *testing.T) {
	kek := testKEK(t)
	s := newSealer(t, kek)
	other := newSealer(t, testKEK(t))
	plain := []byte("PKCS#8 private key material")
	sealed, err := s.Seal(plain, "kid-a")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := append([]byte(nil), sealed...)
		b[i] ^= 0x01
		return b
	}
	cases := []struct {
		name    string
		sealer  *keys.Sealer
		sealed  []byte
		context string
	}{
		{"tampered nonce", s, flip(0), "kid-a"},
		{"tampered ciphertext", s, flip(12), "kid-a"},
		{"tampered tag", s, flip(len(sealed) - 1), "kid-a"},
		{"truncated", s, sealed[:len(sealed)-1], "kid-a"},
		{"too short", s, sealed[:10], "kid-a"},
		{"empty", s, nil, "kid-a"},
		{"appended", s, append(append([]byte(nil), sealed...), 0), "kid-a"},
		{"wrong kek", other, sealed, "kid-a"},
		{"other kid", s, sealed, "kid-b"},
		{"empty kid", s, sealed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sealer.Open(tc.sealed, tc.context)
			if !errors.Is(err, keys.ErrSealed) {
				t.Errorf("Open(%s) = %q, %v, want ErrSealed", tc.name, got, err)
			}
		})
	}
}

func TestDeriveSecret(t *testing.T) {
	kek := testKEK(t)
	s := newSealer(t, kek)
	again := newSealer(t, kek)
	other := newSealer(t, testKEK(t))

	a := s.DeriveSecret("refresh-successor")
	if len(a) != 32 {
		t.Fatalf("DeriveSecret length = %d, want 32", len(a))
	}
	if got := s.DeriveSecret("refresh-successor"); !bytes.Equal(got, a) {
		t.Errorf("DeriveSecret(refresh-successor) twice = %x, %x, want equal", a, got)
	}
	if got := again.DeriveSecret("refresh-successor"); !bytes.Equal(got, a) {
		t.Errorf("DeriveSecret(refresh-successor) on a second Sealer with the same KEK = %x, want %x", got, a)
	}
	if bytes.Equal(a, kek) {
		t.Errorf("DeriveSecret returned the KEK itself")
	}

	seen := map[string]string{hex.EncodeToString(a): "refresh-successor"}
	for _, purpose := range []string{"", "webhook", "refresh-successor ", "Refresh-successor", "csrf"} {
		got := hex.EncodeToString(s.DeriveSecret(purpose))
		if prev, ok := seen[got]; ok {
			t.Errorf("DeriveSecret(%q) = DeriveSecret(%q)", purpose, prev)
		}
		seen[got] = purpose
	}
	if got := other.DeriveSecret("refresh-successor"); bytes.Equal(got, a) {
		t.Errorf("DeriveSecret(refresh-successor) is the same under two KEKs")
	}
}

func TestParseKEKs(t *testing.T) {
	newest, older := testKEK(t), testKEK(t)
	b64 := base64.StdEncoding.EncodeToString
	accept := []struct {
		name string
		in   string
		want [][]byte
	}{
		{"one line", b64(newest) + "\n", [][]byte{newest}},
		{"two lines, newest first", b64(newest) + "\n" + b64(older) + "\n", [][]byte{newest, older}},
		{"comments, blank lines, crlf, mixed forms", "# rotated 2025-01-02\r\n" + b64(newest) + "\r\n\n  " + hex.EncodeToString(older) + "  \n", [][]byte{newest, older}},
		{"raw bytes", string(newest), [][]byte{newest}},
	}
	for _, tc := range accept {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			got, err := keys.ParseKEKs([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseKEKs(%q) error %v, want nil", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ParseKEKs(%q) = %d keys, want %d", tc.in, len(got), len(tc.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], tc.want[i]) {
					t.Errorf("ParseKEKs(%q)[%d] = %x, want %x", tc.in, i, got[i], tc.want[i])
				}
			}
		})
	}
	for _, in := range []string{"", "\n# only a comment\n", b64(newest) + "\nnot a key\n"} {
		if got, err := keys.ParseKEKs([]byte(in)); err == nil {
			t.Errorf("ParseKEKs(%q) = %x, want error", in, got)
		} else if strings.Contains(err.Error(), "not a key") {
			t.Errorf("ParseKEKs(%q) error %q echoes the line", in, err)
		}
	}
}

// TestKeyring checks KEK rotation: the newest key seals, any opens, and
// Reseal moves a value to the newest key once.
func TestKeyring(t *testing.T) {
	oldKEK, newKEK := testKEK(t), testKEK(t)
	before := newSealer(t, oldKEK)
	sealed, err := before.Seal([]byte("secret"), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keys.NewKeyring([][]byte{newKEK, oldKEK}, rand.Reader)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	if got, err := ring.Open(sealed, "ctx"); err != nil || string(got) != "secret" {
		t.Errorf("Open(sealed under the older key) = %q, %v, want secret, nil", got, err)
	}
	fresh, err := ring.Seal([]byte("fresh"), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.Open(fresh, "ctx"); !errors.Is(err, keys.ErrSealed) {
		t.Errorf("old key Open(sealed by the keyring) error %v, want ErrSealed: the newest key seals", err)
	}
	if _, err := ring.Open(sealed, "other"); !errors.Is(err, keys.ErrSealed) {
		t.Errorf("Open(other context) error %v, want ErrSealed", err)
	}

	resealed, changed, err := ring.Reseal(sealed, "ctx")
	if err != nil || !changed {
		t.Fatalf("Reseal(older) = %v, %v, want changed", changed, err)
	}
	again, changed, err := ring.Reseal(resealed, "ctx")
	if err != nil || changed || !bytes.Equal(again, resealed) {
		t.Errorf("Reseal(newest) = changed %v, %v, want it as it is", changed, err)
	}
	onlyNew := newSealer(t, newKEK)
	if got, err := onlyNew.Open(resealed, "ctx"); err != nil || string(got) != "secret" {
		t.Errorf("Open(resealed) with the old line removed = %q, %v, want secret, nil", got, err)
	}
	if _, _, err := onlyNew.Reseal(sealed, "ctx"); !errors.Is(err, keys.ErrSealed) {
		t.Errorf("Reseal(under a key no longer held) error %v, want ErrSealed", err)
	}
	if !bytes.Equal(ring.DeriveSecret("p"), onlyNew.DeriveSecret("p")) {
		t.Error("DeriveSecret differs between the keyring and its newest key alone, want it derived from the newest")
	}
}
