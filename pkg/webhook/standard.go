package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StandardSecretPrefix starts a Standard Webhooks secret: "whsec_" then
// the key in standard base64.
const StandardSecretPrefix = "whsec_"

// standardKeySize is the size of the keys NewStandardSecret makes: 256
// bits, as API.md requires of every webhook secret.
const standardKeySize = 32

// NewStandardSecret returns a new Standard Webhooks secret, "whsec_" and
// 32 bytes read from random in standard base64. Pass crypto/rand.Reader;
// tests may pass a fixed reader.
func NewStandardSecret(random io.Reader) (string, error) {
	key := make([]byte, standardKeySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return "", fmt.Errorf("webhook: reading randomness: %w", err)
	}
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// ParseStandardSecret returns the HMAC key of a Standard Webhooks secret:
// the standard base64 after the "whsec_" prefix. Like the reference
// libraries it also accepts the base64 alone. It returns an error wrapping
// ErrInvalidSecret for anything else, and for an empty key.
func ParseStandardSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, StandardSecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("%w: not %q and standard base64", ErrInvalidSecret, StandardSecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidSecret)
	}
	return key, nil
}

// SignStandard returns the Standard Webhooks signature of event id with
// body sent at timestamp, "v1," and the standard base64 HMAC-SHA256, keyed
// with key (see ParseStandardSecret), of id + "." + Unix seconds + "." +
// body.
func SignStandard(key []byte, id string, timestamp time.Time, body []byte) string {
	sum := mac(key, id+".", strconv.FormatInt(timestamp.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum)
}

// SetStandardHeaders sets the Standard Webhooks headers of a delivery of
// event id with body at timestamp: webhook-id, webhook-timestamp and
// webhook-signature with one signature per key, space-separated (a sender
// rotating its secret signs with both).
func SetStandardHeaders(h http.Header, keys [][]byte, id string, timestamp time.Time, body []byte) {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = SignStandard(k, id, timestamp, body)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}

// VerifyStandard checks a Standard Webhooks delivery: that one of the
// space-separated "v1,<base64>" signatures in webhook-signature is the
// HMAC of webhook-id, webhook-timestamp and body under one of keys (the
// decoded secrets, see ParseStandardSecret), compared in constant time,
// and then that the timestamp is within Tolerance of now. Signatures of
// other versions (v1a, ...) are skipped; a header with none of version v1
// fails as ErrSignature. It returns nil or an error wrapping
// ErrMissingHeader, ErrMalformedHeader, ErrSignature, ErrTooOld, ErrTooNew
// or ErrInvalidSecret, like Verify.
func VerifyStandard(keys [][]byte, header http.Header, body []byte, now time.Time) error {
	if err := checkSecrets(keys); err != nil {
		return err
	}
	id, err := singleHeader(header, HeaderID)
	if err != nil {
		return err
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s longer than %d bytes", ErrMalformedHeader, HeaderID, MaxIDLength)
	}
	tsText, ts, err := timestampHeader(header)
	if err != nil {
		return err
	}
	list, err := singleHeader(header, HeaderSignature)
	if err != nil {
		return err
	}
	var sigs [][]byte
	for _, entry := range strings.Fields(list) {
		version, enc, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			return fmt.Errorf("%w: %s entry is not version,signature", ErrMalformedHeader, HeaderSignature)
		}
		if version != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(sig) != sha256.Size {
			return fmt.Errorf("%w: %s v1 entry is not a base64 HMAC-SHA256", ErrMalformedHeader, HeaderSignature)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrSignature)
	}
	matched := false
	for _, k := range keys {
		want := mac(k, id+".", tsText, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	if !matched {
		return fmt.Errorf("%w: none of %d v1 signatures under any of %d keys", ErrSignature, len(sigs), len(keys))
	}
	return checkTime(ts, now)
}
