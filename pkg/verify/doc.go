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
// # Key sources
//
// A KeySource answers a kid with a key. NewStaticSource serves a fixed JWK
// set. NewRemoteSource serves the issuer's published set: it refreshes it
// in the background at 80% of the Cache-Control max-age (clamped), keeps
// the last good set when a fetch fails, and answers an unknown kid with at
// most one shared refetch per interval, remembering kids still unknown
// for a while, so that forged kids cost neither fetches nor locks.
// NewFileSource serves a set from a file and reloads it when its content
// changes, including the symlink swap of a Kubernetes Secret or ConfigMap
// mount. Remote and file sources start not Ready: until a set has loaded,
// every token is refused (ReasonUnknownKey, wrapping ErrNotReady); a
// verifier never fails open. Sources combines several, for example a
// remote RS256 set and a static HS256 secret.
//
// # Token cache
//
// Config.CacheSize turns on a bounded cache of verified tokens, keyed by
// the SHA-256 of the token (the token itself is never stored), that spares
// a token seen again the RSA check. A cached answer is given only while
// the uncached check would give the same one: before exp plus the clock
// skew, and while the key source still holds the very key that verified
// the token. A key that leaves the set, or is replaced under its kid,
// takes its cached tokens with it. Tokens not yet valid are not cached.
//
// # Revocations
//
// Access tokens are stateless, but a logout must not wait for exp.
// NewRevocationSource polls the issuer's revocation feed (the whole list
// first, then only the changes since its cursor, with If-None-Match) and
// Config.Revocations makes a Verifier consult it after the signature and
// the claims, and on every cache hit: a token whose sid is on the list is
// refused with ReasonSessionRevoked, one whose kid is on it with
// ReasonKeyRevoked, and a kid that enters the list is dropped from this
// package's key sources at once. An entry leaves the list at its until,
// when no token it could refuse is still valid; an answer that would hold
// more than MaxEntries is not applied, so the list is never silently
// incomplete: it grows stale instead. A failed refresh keeps the last
// list. With FailClosed, a list that has not been refreshed for
// MaxStaleness (or never loaded) refuses every token
// (ReasonRevocationsStale); without it, signatures alone decide beyond what
// the last list holds, and Staleness says for how long.
//
// Package verifytest mints tokens and serves key sets for tests.
package verify
