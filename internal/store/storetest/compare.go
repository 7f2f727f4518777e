package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// tm is a time as the databases keep it: UTC, microseconds, no monotonic
// reading, so that reflect.DeepEqual compares instants.
func tm(v time.Time) time.Time { return v.UTC().Truncate(time.Microsecond) }

// tmp is tm through a pointer; nil stays nil.
func tmp(p *time.Time) *time.Time {
	if p == nil {
		return nil
	}
	return ptr(tm(*p))
}

// sameTime reports whether a and b are the same instant at microsecond precision.
func sameTime(a, b time.Time) bool { return tm(a).Equal(tm(b)) }

// orNil maps an empty slice to nil: backends may return either.
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// norm returns a record with times as stored and JSON fields cleared (they
// are compared as JSON by same, since PostgreSQL jsonb reformats them).
func norm(v any) any {
	switch r := v.(type) {
	case store.User:
		r.EmailVerifiedAt, r.CreatedAt, r.UpdatedAt = tmp(r.EmailVerifiedAt), tm(r.CreatedAt), tm(r.UpdatedAt)
		return r
	case store.Session:
		r.CreatedAt, r.LastUsedAt, r.ExpiresAt, r.RevokedAt = tm(r.CreatedAt), tm(r.LastUsedAt), tm(r.ExpiresAt), tmp(r.RevokedAt)
		r.MaxExpiresAt = tm(r.MaxExpiresAt)
		return r
	case store.RefreshToken:
		r.IssuedAt, r.ExpiresAt, r.RotatedAt, r.RevokedAt = tm(r.IssuedAt), tm(r.ExpiresAt), tmp(r.RotatedAt), tmp(r.RevokedAt)
		return r
	case store.AuditEvent:
		r.OccurredAt, r.Data = tm(r.OccurredAt), nil
		return r
	case store.SigningKey:
		r.CreatedAt, r.ActivatesAt, r.RetiresAt, r.ExpiresAt, r.RevokedAt = tm(r.CreatedAt), tm(r.ActivatesAt), tmp(r.RetiresAt), tmp(r.ExpiresAt), tmp(r.RevokedAt)
		r.PublicJWK, r.PrivateSeal = nil, orNil(r.PrivateSeal)
		return r
	case store.IdempotencyRecord:
		r.CreatedAt, r.Body = tm(r.CreatedAt), orNil(r.Body)
		return r
	case store.OneTimeToken:
		r.CreatedAt, r.ExpiresAt, r.UsedAt = tm(r.CreatedAt), tm(r.ExpiresAt), tmp(r.UsedAt)
		return r
	}
	panic(fmt.Sprintf("storetest: norm of %T", v))
}

// jsonOf is the JSON a record field holds, for comparing beside norm.
func jsonOf(v any) []byte {
	switch r := v.(type) {
	case store.AuditEvent:
		return r.Data
	case store.SigningKey:
		return r.PublicJWK
	}
	return nil
}

// same reports whether two records are equal as stored.
func same(got, want any) bool {
	return reflect.DeepEqual(norm(got), norm(want)) && jsonEqual(jsonOf(got), jsonOf(want))
}

// checkSame reports unless got and want are equal as stored.
func checkSame(t *testing.T, call string, got, want any) {
	t.Helper()
	if !same(got, want) {
		t.Errorf("%s =\n\t%s\nwant\n\t%s", call, show(got), show(want))
	}
}

// checkSameList reports unless got and want hold equal records in order.
func checkSameList[T any](t *testing.T, call string, got, want []T) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = same(got[i], want[i])
	}
	if !ok {
		t.Errorf("%s =\n\t%s\nwant\n\t%s", call, show(got), show(want))
	}
}

// jsonEqual reports whether a and b hold the same JSON value; both empty is equal.
func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// show renders a record readably: pointers followed, times in RFC 3339,
// JSON fields as text.
func show(v any) string {
	switch r := v.(type) {
	case store.AuditEvent:
		d := r.Data
		r.Data = nil
		return fmt.Sprintf("%s data=%s", showJSON(r), d)
	case store.SigningKey:
		d := r.PublicJWK
		r.PublicJWK = nil
		return fmt.Sprintf("%s public_jwk=%s", showJSON(r), d)
	case []store.AuditEvent:
		return showList(r)
	case []store.SigningKey:
		return showList(r)
	}
	return showJSON(v)
}

func showList[T any](rs []T) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = show(r)
	}
	return "[" + strings.Join(parts, ",\n\t ") + "]"
}

func showJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}
