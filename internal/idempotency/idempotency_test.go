package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func TestValidKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{"empty", "", false},
		{"uuid", "6f1c1d3e-8a4b-4c2d-9e7f-0a1b2c3d4e5f", true},
		{"single char", "a", true},
		{"printable punctuation", "!~key:/=+", true},
		{"max length", strings.Repeat("k", idempotency.MaxKeyLen), true},
		{"too long", strings.Repeat("k", idempotency.MaxKeyLen+1), false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline", "a\nb", false},
		{"nul", "a\x00b", false},
		{"del", "a\x7fb", false},
		{"non ascii", "clé", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idempotency.ValidKey(tt.key); got != tt.want {
				t.Errorf("ValidKey(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, p := range s {
			out[i] = []byte(p)
		}
		return out
	}
	base := idempotency.Fingerprint(b("POST /v1/register", `{"email":"a@example.com"}`)...)
	if again := idempotency.Fingerprint(b("POST /v1/register", `{"email":"a@example.com"}`)...); again != base {
		t.Errorf("Fingerprint is not stable: %s then %s", base, again)
	}
	if len(base) != 64 {
		t.Errorf("Fingerprint length = %d, want 64 hex digits", len(base))
	}
	differs := []struct {
		name  string
		parts [][]byte
	}{
		{"other body", b("POST /v1/register", `{"email":"b@example.com"}`)},
		{"other route", b("POST /v1/password/forgot", `{"email":"a@example.com"}`)},
		{"parts swapped", b(`{"email":"a@example.com"}`, "POST /v1/register")},
		{"boundary moved", b("POST /v1/register{", `"email":"a@example.com"}`)},
		{"concatenated", b(`POST /v1/register{"email":"a@example.com"}`)},
		{"extra empty part", b("POST /v1/register", `{"email":"a@example.com"}`, "")},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range differs {
		t.Run(tt.name, func(t *testing.T) {
			got := idempotency.Fingerprint(tt.parts...)
			if prev, ok := seen[got]; ok {
				t.Errorf("Fingerprint(%q) = %s, same as %s", tt.parts, got, prev)
			}
			seen[got] = tt.name
		})
	}
	if idempotency.Fingerprint() == idempotency.Fingerprint(nil) {
		t.Errorf("Fingerprint() = Fingerprint(nil), want them to differ (one empty part vs none)")
	}
}

// backends runs f against a fresh store of each real database.
func backends(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Helper()
	for _, b := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"SQLite", testdb.SQLite},
		{"PostgreSQL", testdb.Postgres},
	} {
		t.Run(b.name, func(t *testing.T) {
			f(t, testdb.Store(t, b.url(t)))
		})
	}
}

// newKeys returns Keys over st with a clock starting at a time with a
// sub-second part, so timestamp precision is exercised.
func newKeys(st store.Store) (*idempotency.Keys, *clocktest.Clock) {
	c := clocktest.New(time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC))
	return idempotency.New(st, c.Now), c
}

// wantCode fails unless err is an *apperr.Error with code and kind.
func wantCode(t *testing.T, call string, err error, code string, kind apperr.Kind) {
	t.Helper()
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s = %v, want *apperr.Error %s", call, err, code)
	}
	if ae.Code != code || ae.Kind != kind {
		t.Errorf("%s = code %q kind %v, want code %q kind %v", call, ae.Code, ae.Kind, code, kind)
	}
}

// begin calls Begin and fails the test on an error.
func begin(t *testing.T, k *idempotency.Keys, scope, key, fp string) *idempotency.Response {
	t.Helper()
	r, err := k.Begin(context.Background(), scope, key, fp)
	if err != nil {
		t.Fatalf("Begin(%s, %s) = %v, want no error", scope, key, err)
	}
	return r
}

func complete(t *testing.T, k *idempotency.Keys, scope, key string, r idempotency.Response) {
	t.Helper()
	if err := k.Complete(context.Background(), scope, key, r); err != nil {
		t.Fatalf("Complete(%s, %s) = %v", scope, key, err)
	}
}

func wantReplay(t *testing.T, got *idempotency.Response, want idempotency.Response) {
	t.Helper()
	if got == nil {
		t.Fatalf("Begin = nil (proceed), want replay of %d %q", want.Status, want.Body)
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("Begin = %d %q, want %d %q", got.Status, got.Body, want.Status, want.Body)
	}
}

const scope = "register"

var (
	fp1 = idempotency.Fingerprint([]byte(`{"email":"a@example.com"}`))
	fp2 = idempotency.Fingerprint([]byte(`{"email":"b@example.com"}`))
)

func TestKeys(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		t.Run("first begin proceeds", func(t *testing.T) {
			k, _ := newKeys(st)
			if r := begin(t, k, scope, "first", fp1); r != nil {
				t.Errorf("Begin(first time) = %+v, want nil", r)
			}
		})

		t.Run("complete then replay", func(t *testing.T) {
			k, _ := newKeys(st)
			begin(t, k, scope, "replay", fp1)
			want := idempotency.Response{Status: 201, Body: []byte(`{"id":"u1","email":"a@example.com"}`)}
			complete(t, k, scope, "replay", want)
			for i := 0; i < 2; i++ {
				wantReplay(t, begin(t, k, scope, "replay", fp1), want)
			}
		})

		t.Run("replay of empty body", func(t *testing.T) {
			k, _ := newKeys(st)
			begin(t, k, scope, "empty", fp1)
			complete(t, k, scope, "empty", idempotency.Response{Status: 202})
			wantReplay(t, begin(t, k, scope, "empty", fp1), idempotency.Response{Status: 202})
		})

		t.Run("different fingerprint after complete", func(t *testing.T) {
			k, _ := newKeys(st)
			begin(t, k, scope, "reused", fp1)
			complete(t, k, scope, "reused", idempotency.Response{Status: 201, Body: []byte("{}")})
			r, err := k.Begin(context.Background(), scope, "reused", fp2)
			if r != nil {
				t.Errorf("Begin(other fingerprint) response = %+v, want nil", r)
			}
			wantCode(t, "Begin(other fingerprint)", err, "idempotency_key_reused", apperr.KindUnprocessable)
		})

		t.Run("different fingerprint while in progress", func(t *testing.T) {
			k, _ := newKeys(st)
			begin(t, k, scope, "reused-running", fp1)
			_, err := k.Begin(context.Background(), scope, "reused-running", fp2)
			wantCode(t, "Begin(other fingerprint, in progress)", err, "idempotency_key_reused", apperr.KindUnprocessable)
		})

		t.Run("in progress", func(t *testing.T) {
			k, _ := newKeys(st)
			begin(t, k, scope, "running", fp1)
			r, err := k.Begin(context.Background(), scope, "running", fp1)
			if r != nil {
				t.Errorf("Begin(in progress) response = %+v, want nil", r)
			}
			wantCode(t, "Begin(in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
		})

		t.Run("release then begin proceeds", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx := context.Background()
			begin(t, k, scope, "released", fp1)
			if err := k.Release(ctx, scope, "released"); err != nil {
				t.Fatalf("Release = %v", err)
			}
			if r := begin(t, k, scope, "released", fp1); r != nil {
				t.Errorf("Begin(after release) = %+v, want nil", r)
			}
			// Released, the key is free for another request too.
			if err := k.Release(ctx, scope, "released"); err != nil {
				t.Fatalf("Release = %v", err)
			}
			if r := begin(t, k, scope, "released", fp2); r != nil {
				t.Errorf("Begin(other fingerprint after release) = %+v, want nil", r)
			}
		})

		t.Run("release of unknown key", func(t *testing.T) {
			k, _ := newKeys(st)
			if err := k.Release(context.Background(), scope, "never-seen"); err != nil {
				t.Errorf("Release(unknown) = %v, want nil", err)
			}
		})

		t.Run("complete of unknown key", func(t *testing.T) {
			k, _ := newKeys(st)
			err := k.Complete(context.Background(), scope, "never-reserved", idempotency.Response{Status: 201})
			wantCode(t, "Complete(unknown)", err, "internal_error", apperr.KindInternal)
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Complete(unknown) = %v, want it to wrap store.ErrNotFound", err)
			}
		})

		t.Run("store failure is internal", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := k.Begin(ctx, scope, "canceled", fp1)
			wantCode(t, "Begin(canceled context)", err, "internal_error", apperr.KindInternal)
			err = k.Release(ctx, scope, "canceled")
			wantCode(t, "Release(canceled context)", err, "internal_error", apperr.KindInternal)
			// Nothing was reserved by the failed call.
			if r := begin(t, k, scope, "canceled", fp1); r != nil {
				t.Errorf("Begin(after failed Begin) = %+v, want nil", r)
			}
		})

		t.Run("retention boundary", func(t *testing.T) {
			k, clk := newKeys(st)
			want := idempotency.Response{Status: 201, Body: []byte(`{"id":"u2"}`)}
			begin(t, k, scope, "boundary", fp1)
			complete(t, k, scope, "boundary", want)
			clk.Advance(idempotency.Retention - time.Microsecond)
			wantReplay(t, begin(t, k, scope, "boundary", fp1), want)
			clk.Advance(time.Microsecond)
			wantReplay(t, begin(t, k, scope, "boundary", fp1), want)
		})

		t.Run("expired completed record is replaced", func(t *testing.T) {
			k, clk := newKeys(st)
			ctx := context.Background()
			begin(t, k, scope, "expired", fp1)
			complete(t, k, scope, "expired", idempotency.Response{Status: 201, Body: []byte("old")})
			clk.Advance(idempotency.Retention + time.Microsecond)
			if r := begin(t, k, scope, "expired", fp2); r != nil {
				t.Fatalf("Begin(after retention, other fingerprint) = %+v, want nil", r)
			}
			// The new reservation is now the one remembered.
			_, err := k.Begin(ctx, scope, "expired", fp2)
			wantCode(t, "Begin(replacement in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
			_, err = k.Begin(ctx, scope, "expired", fp1)
			wantCode(t, "Begin(old fingerprint)", err, "idempotency_key_reused", apperr.KindUnprocessable)
			want := idempotency.Response{Status: 201, Body: []byte("new")}
			complete(t, k, scope, "expired", want)
			wantReplay(t, begin(t, k, scope, "expired", fp2), want)
		})

		t.Run("expired reservation is replaced", func(t *testing.T) {
			k, clk := newKeys(st)
			begin(t, k, scope, "stuck", fp1)
			clk.Advance(idempotency.Retention + time.Hour)
			if r := begin(t, k, scope, "stuck", fp1); r != nil {
				t.Errorf("Begin(after abandoned reservation expired) = %+v, want nil", r)
			}
		})

		t.Run("scopes are independent", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx := context.Background()
			const key = "shared-key"
			begin(t, k, "register", key, fp1)
			if r := begin(t, k, "password_forgot", key, fp2); r != nil {
				t.Fatalf("Begin(other scope) = %+v, want nil", r)
			}
			reg := idempotency.Response{Status: 201, Body: []byte("registered")}
			complete(t, k, "register", key, reg)
			_, err := k.Begin(ctx, "password_forgot", key, fp2)
			wantCode(t, "Begin(other scope still in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
			forgot := idempotency.Response{Status: 202}
			complete(t, k, "password_forgot", key, forgot)
			wantReplay(t, begin(t, k, "register", key, fp1), reg)
			wantReplay(t, begin(t, k, "password_forgot", key, fp2), forgot)
			if err := k.Release(ctx, "register", key); err != nil {
				t.Fatalf("Release = %v", err)
			}
			wantReplay(t, begin(t, k, "password_forgot", key, fp2), forgot)
		})

		t.Run("concurrent begins: exactly one proceeds", func(t *testing.T) {
			k, _ := newKeys(st)
			const n = 8
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				proceed int
				busy    int
				other   []error
			)
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := k.Begin(context.Background(), scope, "race", fp1)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil && r == nil:
						proceed++
					case apperr.Is(err, "idempotency_key_in_progress"):
						busy++
					default:
						other = append(other, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if proceed != 1 || busy != n-1 || len(other) != 0 {
				t.Errorf("%d concurrent Begin: %d proceeded, %d in progress, other %v; want 1, %d, none", n, proceed, busy, other, n-1)
			}
		})
	})
}
