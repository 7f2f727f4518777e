package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The header names of both formats. net/http matches header names without
// regard to case, so the Standard Webhooks spelling (webhook-id, ...) is
// the same header.
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, in either direction, counted in whole seconds (the seed's replay
// tolerance).
const Tolerance = 300 * time.Second

// MaxIDLength is the longest event id VerifyStandard and the Handler
// accept, so that a store of seen ids stays bounded in bytes too.
const MaxIDLength = 256

// maxTimestampDigits keeps a timestamp well inside int64.
const maxTimestampDigits = 18

// Sign returns the seed-format signature of body sent at timestamp: the
// lowercase hex HMAC-SHA256, keyed with secret, of the Unix time in
// seconds as decimal text, a ".", and the raw body. The secret is used as
// the bytes it was shown as; nothing is decoded.
func Sign(secret []byte, timestamp time.Time, body []byte) string {
	return hex.EncodeToString(seedMAC(secret, strconv.FormatInt(timestamp.Unix(), 10), body))
}

// SetHeaders sets the seed-format headers of a delivery of event id with
// body at timestamp: Webhook-Id, Webhook-Timestamp and Webhook-Signature.
// It sets nothing else (the sender sets Content-Type and User-Agent).
func SetHeaders(h http.Header, secret []byte, id string, timestamp time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, Sign(secret, timestamp, body))
}

// Verify checks a seed-format delivery: that Webhook-Signature is the
// HMAC of the Webhook-Timestamp text and body under one of secrets (several
// are allowed so a receiver can accept the old and the new secret while
// the issuer rotates it), compared in constant time, and then that the
// timestamp is within Tolerance of now. It returns nil or an error wrapping
// ErrMissingHeader, ErrMalformedHeader, ErrSignature, ErrTooOld, ErrTooNew
// or, for an empty list or an empty secret, ErrInvalidSecret.
//
// The signature is checked before the timestamp, so only a holder of a
// secret ever learns that a timestamp was out of range. Webhook-Id is not
// covered by a seed-format signature and is not read; the event id is the
// signed body's "id" (see the Handler).
func Verify(secrets [][]byte, header http.Header, body []byte, now time.Time) error {
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	tsText, ts, err := timestampHeader(header)
	if err != nil {
		return err
	}
	sigText, err := singleHeader(header, HeaderSignature)
	if err != nil {
		return err
	}
	if len(sigText) != hex.EncodedLen(sha256.Size) {
		return fmt.Errorf("%w: %s is not %d hex digits", ErrMalformedHeader, HeaderSignature, hex.EncodedLen(sha256.Size))
	}
	sig, err := hex.DecodeString(sigText)
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", ErrMalformedHeader, HeaderSignature)
	}
	matched := false
	for _, s := range secrets {
		if hmac.Equal(sig, seedMAC(s, tsText, body)) {
			matched = true
		}
	}
	if !matched {
		return fmt.Errorf("%w under any of %d secrets", ErrSignature, len(secrets))
	}
	return checkTime(ts, now)
}

func seedMAC(secret []byte, ts string, body []byte) []byte {
	return mac(secret, "", ts, body)
}

// mac returns the HMAC-SHA256 of prefix + ts + "." + body, where a
// non-empty prefix is the Standard Webhooks "id.".
func mac(key []byte, prefix, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(prefix))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

func checkSecrets(secrets [][]byte) error {
	if len(secrets) == 0 {
		return fmt.Errorf("%w: no secrets configured", ErrInvalidSecret)
	}
	for i, s := range secrets {
		if len(s) == 0 {
			return fmt.Errorf("%w: secret %d is empty", ErrInvalidSecret, i)
		}
	}
	return nil
}

// singleHeader returns the one value of a required header. A header given
// twice is refused rather than guessed at.
func singleHeader(h http.Header, name string) (string, error) {
	v := h.Values(name)
	switch {
	case len(v) == 0 || len(v) == 1 && v[0] == "":
		return "", fmt.Errorf("%w: %s", ErrMissingHeader, name)
	case len(v) > 1:
		return "", fmt.Errorf("%w: %s given %d times", ErrMalformedHeader, name, len(v))
	}
	return v[0], nil
}

// timestampHeader returns Webhook-Timestamp as sent (the signature covers
// that text) and as seconds. Only ASCII digits are accepted: no sign, no
// space, no fraction.
func timestampHeader(h http.Header) (string, int64, error) {
	s, err := singleHeader(h, HeaderTimestamp)
	if err != nil {
		return "", 0, err
	}
	if len(s) > maxTimestampDigits {
		return "", 0, fmt.Errorf("%w: %s has more than %d digits", ErrMalformedHeader, HeaderTimestamp, maxTimestampDigits)
	}
	var ts int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return "", 0, fmt.Errorf("%w: %s is not a decimal number of seconds", ErrMalformedHeader, HeaderTimestamp)
		}
		ts = ts*10 + int64(c-'0')
	}
	return s, ts, nil
}

// checkTime refuses a timestamp more than Tolerance away from now.
func checkTime(ts int64, now time.Time) error {
	tol := int64(Tolerance / time.Second)
	switch d := now.Unix() - ts; {
	case d > tol:
		return fmt.Errorf("%w: %d s old, tolerance %d s", ErrTooOld, d, tol)
	case d < -tol:
		return fmt.Errorf("%w: %d s ahead, tolerance %d s", ErrTooNew, -d, tol)
	}
	return nil
}
