// Package webhook signs and verifies the webhook deliveries of the Palisade
// issuer, and owns the receiver side: a net/http Handler that verifies a
// delivery and passes each event to the application once. It imports only
// the standard library, so any Go service can receive Palisade webhooks
// with it; the issuer signs with the same functions.
//
// # Formats
//
// The seed format (API.md section 5, the default): Webhook-Id is the body's
// "id", Webhook-Timestamp is the Unix time of the attempt in seconds, and
// Webhook-Signature is the lowercase hex HMAC-SHA256 of the timestamp text,
// ".", and the raw body, keyed with the endpoint's secret exactly as it was
// shown (its bytes, nothing decoded). Sign, SetHeaders and Verify implement
// it.
//
// The Standard Webhooks format (https://www.standardwebhooks.com):
// webhook-id, webhook-timestamp, and webhook-signature holding one or more
// space-separated "v1,<base64>" signatures of id.timestamp.body, keyed with
// the base64-decoded part of a "whsec_" secret. SignStandard,
// SetStandardHeaders, VerifyStandard and ParseStandardSecret implement it.
//
// Both verifiers take several secrets, so a receiver can accept the old
// and the new one while the issuer rotates, compare in constant time, check
// the signature before the timestamp, and accept a timestamp at most
// Tolerance (300 s) away from the receiver's clock in either direction.
// Their errors wrap sentinels (ErrSignature, ErrTooOld, ErrTooNew,
// ErrMissingHeader, ErrMalformedHeader) that StatusOf maps to 401 or 400.
//
// # Receiving
//
// NewHandler wraps the application's handler. Delivery is at least once:
// the Handler drops duplicates by event id with a Store (an in-memory one
// by default, bounded, remembering an id twice Tolerance), marks an id done
// only when the application answered 2xx, and lets a failed delivery's
// retry through. See Handler for every answer it gives.
package webhook
