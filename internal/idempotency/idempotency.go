// Package idempotency owns the Idempotency-Key rule: a repeated key with the
// same request within the retention window gets the original response again
// and causes nothing twice; the same key with a different request is refused.
package idempotency

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// Retention is how long a key is remembered.
const Retention = 24 * time.Hour

// MaxKeyLen bounds the key a client may send.
const MaxKeyLen = 255

// Store is what this package needs of the storage layer.
type Store interface {
	ReserveIdempotencyKey(ctx context.Context, r store.IdempotencyRecord, notBefore time.Time) (store.IdempotencyRecord, error)
	CompleteIdempotencyKey(ctx context.Context, scope, key string, status int, body []byte) error
	ReleaseIdempotencyKey(ctx context.Context, scope, key string) error
}

// Keys remembers responses by key.
type Keys struct {
	st  Store
	now func() time.Time
}

// New returns Keys over st.
func New(st Store, now func() time.Time) *Keys { return &Keys{st: st, now: now} }

// Response is a remembered answer.
type Response struct {
	Status int
	Body   []byte
}

// ValidKey reports whether a client-sent key is acceptable: printable ASCII,
// 1 to MaxKeyLen characters.
func ValidKey(k string) bool {
	if k == "" || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint identifies a request for the "same body" comparison.
func Fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i, l := 0, len(p); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Begin reserves key for a request with fingerprint fp. It returns a
// remembered response to replay, or nil when the caller should run the
// request and then call Complete (or Release when it failed on our side).
func (k *Keys) Begin(ctx context.Context, scope, key, fp string) (*Response, error) {
	now := k.now().UTC().Truncate(time.Microsecond)
	rec, err := k.st.ReserveIdempotencyKey(ctx, store.IdempotencyRecord{
		Scope: scope, Key: key, RequestHash: fp, CreatedAt: now,
	}, now.Add(-Retention))
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, store.ErrAlreadyExists) {
		return nil, apperr.Internal(err)
	}
	if subtle.ConstantTimeCompare([]byte(rec.RequestHash), []byte(fp)) != 1 {
		return nil, apperr.New(apperr.KindUnprocessable, "idempotency_key_reused",
			"This Idempotency-Key was used with a different request.")
	}
	if rec.Status == 0 {
		return nil, apperr.New(apperr.KindConflict, "idempotency_key_in_progress",
			"A request with this Idempotency-Key is still being processed.")
	}
	return &Response{Status: rec.Status, Body: rec.Body}, nil
}

// Complete remembers the response of a reserved key.
func (k *Keys) Complete(ctx context.Context, scope, key string, r Response) error {
	if err := k.st.CompleteIdempotencyKey(ctx, scope, key, r.Status, r.Body); err != nil {
		return apperr.Internal(err)
	}
	return nil
}

// Release forgets a reservation so the client may retry after our failure.
func (k *Keys) Release(ctx context.Context, scope, key string) error {
	if err := k.st.ReleaseIdempotencyKey(ctx, scope, key); err != nil {
		return apperr.Internal(err)
	}
	return nil
}
