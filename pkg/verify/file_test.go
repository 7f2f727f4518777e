package verify_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newManualFile(t *testing.T, path string) (*verify.FileSource, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(now)
	s, err := verify.NewManualFileSource(path, verify.FileOptions{Now: clk.Now})
	if err != nil {
		t.Fatalf("NewFileSource(%q) = %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// wantPoll polls s and checks the outcome.
func wantPoll(t *testing.T, s *verify.FileSource, wantLoaded, wantErr bool) error {
	t.Helper()
	loaded, err := s.Poll()
	if loaded != wantLoaded || (err != nil) != wantErr {
		t.Fatalf("Poll = %v, %v; want loaded %v, error %v", loaded, err, wantLoaded, wantErr)
	}
	return err
}

func wantKey(t *testing.T, s verify.KeySource, kid string, want error) {
	t.Helper()
	_, err := s.Key(context.Background(), kid)
	if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
		t.Errorf("Key(%q) = %v, want %v", kid, err, want)
	}
}

func TestFileSource(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	s, clk := newManualFile(t, path)

	// The steps run in order: each starts from the state the last left.
	t.Run("missing file: not ready", func(t *testing.T) {
		err := wantPoll(t, s, false, true)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Poll = %v, want fs.ErrNotExist", err)
		}
		if s.Ready() {
			t.Error("Ready = true, want false")
		}
		wantKey(t, s, "test-1", verify.ErrNotReady)
	})
	t.Run("load", func(t *testing.T) {
		writeFile(t, path, ks.JWKS())
		wantPoll(t, s, true, false)
		if !s.Ready() || !s.LoadedAt().Equal(now) {
			t.Errorf("Ready, LoadedAt = %v, %v, want true, %v", s.Ready(), s.LoadedAt(), now)
		}
		wantKey(t, s, "test-1", nil)
		wantKey(t, s, "test-2", verify.ErrUnknownKey)
		wantPoll(t, s, false, false) // unchanged
	})
	t.Run("changed in place", func(t *testing.T) {
		ks.Rotate(t)
		clk.Advance(10)
		writeFile(t, path, ks.JWKS())
		wantPoll(t, s, true, false)
		wantKey(t, s, "test-2", nil)
		if !s.LoadedAt().Equal(clk.Now()) {
			t.Errorf("LoadedAt = %v, want %v", s.LoadedAt(), clk.Now())
		}
	})
	t.Run("rewritten unchanged", func(t *testing.T) {
		writeFile(t, path, ks.JWKS())
		wantPoll(t, s, false, false)
	})
	t.Run("garbage keeps the good set", func(t *testing.T) {
		writeFile(t, path, []byte("{not json"))
		wantPoll(t, s, true, true)
		wantPoll(t, s, false, true) // the same error, not a new attempt
		wantKey(t, s, "test-2", nil)
	})
	t.Run("deleted keeps the good set", func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		wantPoll(t, s, false, true)
		if !s.Ready() {
			t.Error("Ready = false after the file was deleted, want true")
		}
		wantKey(t, s, "test-2", nil)
	})
}

// TestFileSourceKubernetesSwap mimics the atomic writer of the kubelet: the
// file is a symlink through ..data, a symlink to a timestamped directory
// that is replaced by renaming a new link over it.
func TestFileSourceKubernetesSwap(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	dir := t.TempDir()
	publish := func(name string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "jwks.json"), ks.JWKS())
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	publish("..2024_01_01_00_00_00.1")
	path := filepath.Join(dir, "jwks.json")
	if err := os.Symlink(filepath.Join("..data", "jwks.json"), path); err != nil {
		t.Fatal(err)
	}
	s, _ := newManualFile(t, path)
	wantPoll(t, s, true, false)
	wantKey(t, s, "test-1", nil)

	ks.Rotate(t)
	publish("..2024_01_01_00_05_00.2")
	if err := os.RemoveAll(filepath.Join(dir, "..2024_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	wantPoll(t, s, true, false)
	wantKey(t, s, "test-2", nil)
}

func TestNewFileSource(t *testing.T) {
	ks := getFixture().ks
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, ks.JWKS())
	var reloads []error
	s, err := verify.NewFileSource(path, verify.FileOptions{OnReload: func(err error) { reloads = append(reloads, err) }})
	if err != nil {
		t.Fatalf("NewFileSource = %v", err)
	}
	if !s.Ready() {
		t.Error("Ready = false, want the file read by the constructor")
	}
	wantKey(t, s, "test-1", nil)
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if len(reloads) != 1 || reloads[0] != nil {
		t.Errorf("OnReload saw %v, want one nil", reloads)
	}

	missing, err := verify.NewFileSource(filepath.Join(t.TempDir(), "absent.json"), verify.FileOptions{})
	if err != nil {
		t.Fatalf("NewFileSource(missing file) = %v, want a source that is not ready", err)
	}
	defer missing.Close()
	if missing.Ready() {
		t.Error("Ready = true for a missing file")
	}

	for _, tt := range []struct {
		name string
		path string
		opts verify.FileOptions
	}{
		{"empty path", "", verify.FileOptions{}},
		{"negative interval", path, verify.FileOptions{Interval: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := verify.NewFileSource(tt.path, tt.opts); err == nil {
				_ = s.Close()
				t.Errorf("NewFileSource(%q) = nil error, want one", tt.path)
			}
		})
	}
}
