package verify

import (
	"errors"
	"fmt"
)

// Reason says in one word why a token was refused. Its string values are
// stable: logs, metrics and the verifier's `check` command print them.
type Reason string

// The reasons Verify refuses a token for. They are for the operator; a
// client only ever learns that the token is missing or invalid.
const (
	ReasonMissing     Reason = "missing"       // no token at all
	ReasonMalformed   Reason = "malformed"     // not a compact JWS: segments, base64url, JSON, size
	ReasonUnknownKey  Reason = "unknown_key"   // the key source has no key for the kid (or could not answer)
	ReasonAlgorithm   Reason = "algorithm"     // alg not allowed, or the key found is unfit for it
	ReasonHeader      Reason = "header"        // a header parameter outside alg, typ, kid; a bad typ; no kid
	ReasonSignature   Reason = "signature"     // the signature does not match
	ReasonExpired     Reason = "expired"       // past exp (plus the clock skew)
	ReasonNotYetValid Reason = "not_yet_valid" // before nbf, or iat in the future (minus the clock skew)
	ReasonIssuer      Reason = "issuer"        // iss missing or not the configured issuer
	ReasonAudience    Reason = "audience"      // aud missing or without the configured audience
	ReasonClaims      Reason = "claims"        // a claim of the wrong type, exp or sub missing

	// The reasons of a Verifier with Config.Revocations.
	ReasonSessionRevoked   Reason = "session_revoked"   // the sid is on the revocation list
	ReasonKeyRevoked       Reason = "key_revoked"       // the kid is on the revocation list
	ReasonRevocationsStale Reason = "revocations_stale" // fail-closed, and the list is stale or never loaded
)

// ErrUnknownKey is what a KeySource returns, wrapped, when it has no key for
// a kid. Verify reports it with ReasonUnknownKey.
var ErrUnknownKey = errors.New("verify: unknown key id")

// ErrNotReady is what a RemoteSource or FileSource returns, wrapped, while
// it has never loaded a key set. It is deliberately not ErrUnknownKey, so a
// caller can tell a verifier that is starting up from a forged kid; Verify
// still reports it with ReasonUnknownKey and never fails open.
var ErrNotReady = errors.New("verify: key set not loaded yet")

// Error is the error Verify returns for every refused token. Reason is safe
// to log; Err carries the detail and is for the log only. Neither ever
// contains the token.
type Error struct {
	Reason Reason
	Err    error
}

// Error returns "verify: token <reason>: <detail>".
func (e *Error) Error() string {
	if e.Err == nil {
		return "verify: token " + string(e.Reason)
	}
	return "verify: token " + string(e.Reason) + ": " + e.Err.Error()
}

// Unwrap returns the detail, so errors.Is finds ErrUnknownKey or a context
// error from the key source.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of the *Error inside err, or "" when err holds
// none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func fail(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Err: fmt.Errorf(format, args...)}
}

// quoteParam quotes a string that came from the token for an error message:
// quoted so it cannot forge log lines, and truncated so it cannot flood them.
func quoteParam(s string) string {
	const max = 32
	if len(s) > max {
		s = s[:max] + "..."
	}
	return fmt.Sprintf("%q", s)
}
