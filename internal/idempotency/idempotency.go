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

// Lease is how long an unfinished reservation keeps its key from other
// requests. A request that reserved a key and could neither complete nor
// release it (the database went away, the process died) leaves the key
// unfinished; once the lease has passed, the next request with the same key
// and the same body takes the reservation over instead of getting
// idempotency_key_in_progress until the key expires. A minute is well above
// what a register or forgot-password request takes (one password hash from
// a bounded queue and a few statements, each failing within the database
// connect timeout when the database cannot be reached); should a request
// outlive it anyway, the reservation is fenced: its late Complete or Release
// no longer touches the reservation of the request that took it over.
const Lease = time.Minute

// MaxKeyLen bounds the key a client may send.
const MaxKeyLen = 255

// Store is what this package needs of the storage layer.
type Store interface {
	ReserveIdempotencyKey(ctx context.Context, r store.IdempotencyRecord, notBefore time.Time) (store.IdempotencyRecord, error)
	TakeOverIdempotencyKey(ctx context.Context, scope, key, requestHash string, staleBefore, at time.Time) error
	CompleteIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time, status int, body []byte) error
	ReleaseIdempotencyKey(ctx context.Context, scope, key string, reservedAt time.Time) error
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

// Reservation is a key held by one request until it calls Complete or
// Release (or its lease runs out).
type Reservation struct {
	scope, key string
	at         time.Time // created_at of the reservation: whose it is
}

// Begin reserves key for a request with fingerprint fp. It returns either a
// reservation, when the caller should run the request and then call
// Complete (or Release when it failed on our side), or a remembered response
// to replay. An unfinished reservation older than Lease with the same
// fingerprint is taken over; of concurrent requests taking it over, one
// gets the reservation and the others idempotency_key_in_progress.
func (k *Keys) Begin(ctx context.Context, scope, key, fp string) (*Reservation, *Response, error) {
	now := k.now().UTC().Truncate(time.Microsecond)
	rec, err := k.st.ReserveIdempotencyKey(ctx, store.IdempotencyRecord{
		Scope: scope, Key: key, RequestHash: fp, CreatedAt: now,
	}, now.Add(-Retention))
	if err == nil {
		return &Reservation{scope: scope, key: key, at: now}, nil, nil
	}
	if !errors.Is(err, store.ErrAlreadyExists) {
		return nil, nil, apperr.Internal(err)
	}
	if subtle.ConstantTimeCompare([]byte(rec.RequestHash), []byte(fp)) != 1 {
		return nil, nil, apperr.New(apperr.KindUnprocessable, "idempotency_key_reused",
			"This Idempotency-Key was used with a different request.")
	}
	if rec.Status != 0 {
		return nil, &Response{Status: rec.Status, Body: rec.Body}, nil
	}
	inProgress := apperr.New(apperr.KindConflict, "idempotency_key_in_progress",
		"A request with this Idempotency-Key is still being processed.")
	staleBefore := now.Add(-Lease)
	if !rec.CreatedAt.Before(staleBefore) {
		return nil, nil, inProgress
	}
	switch err := k.st.TakeOverIdempotencyKey(ctx, scope, key, fp, staleBefore, now); {
	case err == nil:
		return &Reservation{scope: scope, key: key, at: now}, nil, nil
	case errors.Is(err, store.ErrNotFound):
		// Another request took it over, or the first one finished or
		// released it just now: a retry gets the answer.
		return nil, nil, inProgress
	default:
		return nil, nil, apperr.Internal(err)
	}
}

// Complete remembers the response of a reservation. It fails with
// store.ErrNotFound in the chain when the reservation was taken over.
func (k *Keys) Complete(ctx context.Context, res *Reservation, r Response) error {
	if err := k.st.CompleteIdempotencyKey(ctx, res.scope, res.key, res.at, r.Status, r.Body); err != nil {
		return apperr.Internal(err)
	}
	return nil
}

// Release forgets a reservation so the client may retry after our failure.
// A reservation another request took over is left to that request.
func (k *Keys) Release(ctx context.Context, res *Reservation) error {
	if err := k.st.ReleaseIdempotencyKey(ctx, res.scope, res.key, res.at); err != nil {
		return apperr.Internal(err)
	}
	return nil
}
