package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// begin calls Begin and fails the test on an error. It returns the
// reservation, or nil and the response to replay.
func begin(t *testing.T, k *idempotency.Keys, scope, key, fp string) (*idempotency.Reservation, *idempotency.Response) {
	t.Helper()
	res, r, err := k.Begin(context.Background(), scope, key, fp)
	if err != nil {
		t.Fatalf("Begin(%s, %s) = %v, want no error", scope, key, err)
	}
	if (res == nil) == (r == nil) {
		t.Fatalf("Begin(%s, %s) = reservation %v, response %v, want exactly one", scope, key, res, r)
	}
	return res, r
}

// reserve calls Begin and fails the test unless it reserved the key.
func reserve(t *testing.T, k *idempotency.Keys, scope, key, fp string) *idempotency.Reservation {
	t.Helper()
	res, r := begin(t, k, scope, key, fp)
	if res == nil {
		t.Fatalf("Begin(%s, %s) = replay of %d %q, want a reservation", scope, key, r.Status, r.Body)
	}
	return res
}

// replayed calls Begin and returns the response it replays (nil if it
// reserved the key instead).
func replayed(t *testing.T, k *idempotency.Keys, scope, key, fp string) *idempotency.Response {
	t.Helper()
	_, r := begin(t, k, scope, key, fp)
	return r
}

func complete(t *testing.T, k *idempotency.Keys, res *idempotency.Reservation, r idempotency.Response) {
	t.Helper()
	if err := k.Complete(context.Background(), res, r); err != nil {
		t.Fatalf("Complete = %v", err)
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
			reserve(t, k, scope, "first", fp1)
		})

		t.Run("complete then replay", func(t *testing.T) {
			k, _ := newKeys(st)
			res := reserve(t, k, scope, "replay", fp1)
			want := idempotency.Response{Status: 201, Body: []byte(`{"id":"u1","email":"a@example.com"}`)}
			complete(t, k, res, want)
			for i := 0; i < 2; i++ {
				wantReplay(t, replayed(t, k, scope, "replay", fp1), want)
			}
		})

		t.Run("replay of empty body", func(t *testing.T) {
			k, _ := newKeys(st)
			complete(t, k, reserve(t, k, scope, "empty", fp1), idempotency.Response{Status: 202})
			wantReplay(t, replayed(t, k, scope, "empty", fp1), idempotency.Response{Status: 202})
		})

		t.Run("different fingerprint after complete", func(t *testing.T) {
			k, _ := newKeys(st)
			complete(t, k, reserve(t, k, scope, "reused", fp1), idempotency.Response{Status: 201, Body: []byte("{}")})
			res, r, err := k.Begin(context.Background(), scope, "reused", fp2)
			if res != nil || r != nil {
				t.Errorf("Begin(other fingerprint) = %v, %+v, want nil, nil", res, r)
			}
			wantCode(t, "Begin(other fingerprint)", err, "idempotency_key_reused", apperr.KindUnprocessable)
		})

		t.Run("different fingerprint while in progress", func(t *testing.T) {
			k, _ := newKeys(st)
			reserve(t, k, scope, "reused-running", fp1)
			_, _, err := k.Begin(context.Background(), scope, "reused-running", fp2)
			wantCode(t, "Begin(other fingerprint, in progress)", err, "idempotency_key_reused", apperr.KindUnprocessable)
		})

		t.Run("in progress", func(t *testing.T) {
			k, _ := newKeys(st)
			reserve(t, k, scope, "running", fp1)
			res, r, err := k.Begin(context.Background(), scope, "running", fp1)
			if res != nil || r != nil {
				t.Errorf("Begin(in progress) = %v, %+v, want nil, nil", res, r)
			}
			wantCode(t, "Begin(in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
		})

		t.Run("release then begin proceeds", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx := context.Background()
			res := reserve(t, k, scope, "released", fp1)
			if err := k.Release(ctx, res); err != nil {
				t.Fatalf("Release = %v", err)
			}
			res = reserve(t, k, scope, "released", fp1)
			// Released, the key is free for another request too.
			if err := k.Release(ctx, res); err != nil {
				t.Fatalf("Release = %v", err)
			}
			reserve(t, k, scope, "released", fp2)
		})

		t.Run("release twice", func(t *testing.T) {
			k, _ := newKeys(st)
			res := reserve(t, k, scope, "released-twice", fp1)
			for i := 0; i < 2; i++ {
				if err := k.Release(context.Background(), res); err != nil {
					t.Errorf("Release #%d = %v, want nil", i+1, err)
				}
			}
		})

		t.Run("complete after release", func(t *testing.T) {
			k, _ := newKeys(st)
			res := reserve(t, k, scope, "released-then-completed", fp1)
			if err := k.Release(context.Background(), res); err != nil {
				t.Fatalf("Release = %v", err)
			}
			err := k.Complete(context.Background(), res, idempotency.Response{Status: 201})
			wantCode(t, "Complete(released)", err, "internal_error", apperr.KindInternal)
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Complete(released) = %v, want it to wrap store.ErrNotFound", err)
			}
		})

		t.Run("store failure is internal", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, _, err := k.Begin(ctx, scope, "canceled", fp1)
			wantCode(t, "Begin(canceled context)", err, "internal_error", apperr.KindInternal)
			res := reserve(t, k, scope, "canceled", fp1) // nothing was reserved by the failed call
			err = k.Release(ctx, res)
			wantCode(t, "Release(canceled context)", err, "internal_error", apperr.KindInternal)
		})

		t.Run("retention boundary", func(t *testing.T) {
			k, clk := newKeys(st)
			want := idempotency.Response{Status: 201, Body: []byte(`{"id":"u2"}`)}
			complete(t, k, reserve(t, k, scope, "boundary", fp1), want)
			clk.Advance(idempotency.Retention - time.Microsecond)
			wantReplay(t, replayed(t, k, scope, "boundary", fp1), want)
			clk.Advance(time.Microsecond)
			wantReplay(t, replayed(t, k, scope, "boundary", fp1), want)
		})

		t.Run("expired completed record is replaced", func(t *testing.T) {
			k, clk := newKeys(st)
			ctx := context.Background()
			complete(t, k, reserve(t, k, scope, "expired", fp1), idempotency.Response{Status: 201, Body: []byte("old")})
			clk.Advance(idempotency.Retention + time.Microsecond)
			res := reserve(t, k, scope, "expired", fp2)
			// The new reservation is now the one remembered.
			_, _, err := k.Begin(ctx, scope, "expired", fp2)
			wantCode(t, "Begin(replacement in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
			_, _, err = k.Begin(ctx, scope, "expired", fp1)
			wantCode(t, "Begin(old fingerprint)", err, "idempotency_key_reused", apperr.KindUnprocessable)
			want := idempotency.Response{Status: 201, Body: []byte("new")}
			complete(t, k, res, want)
			wantReplay(t, replayed(t, k, scope, "expired", fp2), want)
		})

		t.Run("expired reservation is replaced", func(t *testing.T) {
			k, clk := newKeys(st)
			reserve(t, k, scope, "stuck", fp1)
			clk.Advance(idempotency.Retention + time.Hour)
			reserve(t, k, scope, "stuck", fp2)
		})

		t.Run("abandoned reservation is taken over after the lease", func(t *testing.T) {
			k, clk := newKeys(st)
			ctx := context.Background()
			first := reserve(t, k, scope, "abandoned", fp1)
			clk.Advance(idempotency.Lease)
			_, _, err := k.Begin(ctx, scope, "abandoned", fp1)
			wantCode(t, "Begin(in progress, lease just ending)", err, "idempotency_key_in_progress", apperr.KindConflict)
			clk.Advance(time.Microsecond)
			_, _, err = k.Begin(ctx, scope, "abandoned", fp2)
			wantCode(t, "Begin(other fingerprint, lease over)", err, "idempotency_key_reused", apperr.KindUnprocessable)
			second := reserve(t, k, scope, "abandoned", fp1)
			_, _, err = k.Begin(ctx, scope, "abandoned", fp1)
			wantCode(t, "Begin(taken over, in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)

			// The first request finishing late changes nothing.
			err = k.Complete(ctx, first, idempotency.Response{Status: 201, Body: []byte("late")})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Complete(taken over) = %v, want it to wrap store.ErrNotFound", err)
			}
			if err := k.Release(ctx, first); err != nil {
				t.Errorf("Release(taken over) = %v, want nil", err)
			}
			_, _, err = k.Begin(ctx, scope, "abandoned", fp1)
			wantCode(t, "Begin(taken over, first finished late)", err, "idempotency_key_in_progress", apperr.KindConflict)
			want := idempotency.Response{Status: 201, Body: []byte("second")}
			complete(t, k, second, want)
			clk.Advance(idempotency.Lease + time.Hour) // a completed key is no lease
			wantReplay(t, replayed(t, k, scope, "abandoned", fp1), want)
		})

		t.Run("scopes are independent", func(t *testing.T) {
			k, _ := newKeys(st)
			ctx := context.Background()
			const key = "shared-key"
			regRes := reserve(t, k, "register", key, fp1)
			forgotRes := reserve(t, k, "password_forgot", key, fp2)
			reg := idempotency.Response{Status: 201, Body: []byte("registered")}
			complete(t, k, regRes, reg)
			_, _, err := k.Begin(ctx, "password_forgot", key, fp2)
			wantCode(t, "Begin(other scope still in progress)", err, "idempotency_key_in_progress", apperr.KindConflict)
			forgot := idempotency.Response{Status: 202}
			complete(t, k, forgotRes, forgot)
			wantReplay(t, replayed(t, k, "register", key, fp1), reg)
			wantReplay(t, replayed(t, k, "password_forgot", key, fp2), forgot)
			if err := k.Release(ctx, regRes); err != nil {
				t.Fatalf("Release = %v", err)
			}
			wantReplay(t, replayed(t, k, "register", key, fp1), reg) // completed: release leaves it
			wantReplay(t, replayed(t, k, "password_forgot", key, fp2), forgot)
		})

		t.Run("concurrent begins: exactly one proceeds", func(t *testing.T) {
			k, _ := newKeys(st)
			raceBegins(t, k, "race", 8)
		})

		t.Run("concurrent takeovers: exactly one proceeds", func(t *testing.T) {
			k, clk := newKeys(st)
			reserve(t, k, scope, "race-takeover", fp1)
			clk.Advance(idempotency.Lease + time.Second)
			raceBegins(t, k, "race-takeover", 8)
		})
	})
}

// raceBegins runs n concurrent Begins of key with fp1 and checks that
// exactly one reserves it and the others get idempotency_key_in_progress.
func raceBegins(t *testing.T, k *idempotency.Keys, key string, n int) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		proceed int
		busy    int
		other   []error
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-start
			res, r, err := k.Begin(context.Background(), scope, key, fp1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res != nil && r == nil:
				proceed++
			case apperr.Is(err, "idempotency_key_in_progress"):
				busy++
			default:
				other = append(other, fmt.Errorf("reservation %v, replay %v, err %w", res, r, err))
			}
		})
	}
	close(start)
	wg.Wait()
	if proceed != 1 || busy != n-1 || len(other) != 0 {
		t.Errorf("%d concurrent Begin(%s): %d proceeded, %d in progress, other %v; want 1, %d, none", n, key, proceed, busy, other, n-1)
	}
}
