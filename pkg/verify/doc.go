// Package verify verifies the RS256 (and, where configured, HS256) JWT
// access tokens minted by the Palisade issuer. It owns the whole check a
// resource server needs: key sources, the Verifier, the Identity a valid
// token carries, and net/http middleware that puts that Identity in the
// request context. The verifier sidecar is a thin shell around it; Go
// services may embed it instead.
//
// Verification follows RFC 8725: the accepted algorithms come from the
// Config, never from the token; the header may only hold alg, typ and kid;
// the signature is checked before anything in the payload is read; then
// exp, nbf, iat, iss and aud are checked with a configurable clock skew.
// A refused token yields an *Error whose Reason is safe to log and count.
// Clients only ever see one answer, written by WriteUnauthorized.
//
// Package verifytest mints tokens and serves key sets for tests.
package verify
