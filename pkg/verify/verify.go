package verify

import (
	"bytes"
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// defaultMaxTokenBytes bounds the work a token can cause before its
// signature is checked. Our access tokens are well under 1 KiB.
const defaultMaxTokenBytes = 8192

// Config is what a Verifier checks tokens against.
type Config struct {
	// Issuer must equal the iss claim exactly. Required.
	Issuer string
	// Audience must be the aud claim, or one of its elements. Required.
	Audience string
	// Algorithms allows signature algorithms; the token header never
	// decides (RFC 8725 section 3.1). Only "RS256" and "HS256" are
	// supported. Empty means ["RS256"].
	Algorithms []string
	// ClockSkew is the allowance for exp, nbf and iat. Zero means none;
	// 30s is a sensible value between servers kept in sync by NTP.
	ClockSkew time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxTokenBytes refuses longer tokens before any decoding. Zero
	// means 8192.
	MaxTokenBytes int
	// CacheSize is how many verified tokens are remembered, keyed by
	// their SHA-256, so that a token seen again skips the signature check.
	// Zero turns the cache off. A remembered token is accepted only while
	// the uncached check would accept it: before exp (plus ClockSkew), and
	// while the key source still holds the very key that verified it.
	CacheSize int
	// Revocations, when set, is the issuer's revocation list: a token whose
	// sid or kid is on it is refused (ReasonSessionRevoked,
	// ReasonKeyRevoked), a cached one included, and, when the source fails
	// closed, every token while the list is stale (ReasonRevocationsStale).
	// A kid that enters the list is also dropped from the key sources of
	// this package at once.
	Revocations *RevocationSource
}

// Identity is what a verified access token says about its bearer.
// Optional claims that were absent are empty strings or zero times.
type Identity struct {
	Subject        string // sub: the user id
	Role           string
	TenantID       string
	OrganizationID string
	SessionID      string // sid
	TokenID        string // jti
	Issuer         string
	Audience       []string
	IssuedAt       time.Time
	NotBefore      time.Time
	ExpiresAt      time.Time
}

// Verifier verifies access tokens. It is safe for concurrent use.
type Verifier struct {
	src      KeySource
	keys     entryCache // prepared keys of a foreign src
	issuer   string
	audience string
	rs256    bool
	hs256    bool
	skew     time.Duration
	now      func() time.Time
	maxBytes int
	cache    *tokenCache       // nil when off
	lookup   keyLookup         // src itself when it can answer without fetching
	revs     *RevocationSource // nil: signatures alone
}

// New returns a Verifier that takes keys from src. It reports every problem
// of cfg at once.
func New(src KeySource, cfg Config) (*Verifier, error) {
	var errs []error
	if src == nil {
		errs = append(errs, errors.New("verify: nil key source"))
	}
	if cfg.Issuer == "" {
		errs = append(errs, errors.New("verify: issuer is required"))
	}
	if cfg.Audience == "" {
		errs = append(errs, errors.New("verify: audience is required"))
	}
	if cfg.ClockSkew < 0 {
		errs = append(errs, fmt.Errorf("verify: negative clock skew %v", cfg.ClockSkew))
	}
	if cfg.MaxTokenBytes < 0 {
		errs = append(errs, fmt.Errorf("verify: negative max token size %d", cfg.MaxTokenBytes))
	}
	if cfg.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("verify: negative cache size %d", cfg.CacheSize))
	}
	v := &Verifier{
		src:      src,
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		skew:     cfg.ClockSkew,
		now:      cfg.Now,
		maxBytes: cfg.MaxTokenBytes,
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = []string{algRS256}
	}
	for _, a := range algs {
		switch a {
		case algRS256:
			v.rs256 = true
		case algHS256:
			v.hs256 = true
		default:
			errs = append(errs, fmt.Errorf("verify: algorithm %q not supported (want RS256 or HS256)", a))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.maxBytes == 0 {
		v.maxBytes = defaultMaxTokenBytes
	}
	v.lookup, _ = src.(keyLookup)
	if cfg.CacheSize > 0 {
		v.cache = newTokenCache(cfg.CacheSize)
	}
	if v.revs = cfg.Revocations; v.revs != nil {
		if d, ok := src.(keyDropper); ok {
			v.revs.onKeysRevoked(d.dropKeys)
		}
	}
	return v, nil
}

// Verify checks token and returns the identity it carries. Every error is
// an *Error whose Reason says which check failed; the checks run in the
// order of RFC 8725: structure, header, key, signature, then claims, so
// nothing from an unsigned payload is ever looked at.
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	id, err := v.verify(ctx, token)
	if err != nil {
		// Returned only when non-nil: a nil *Error in an error interface
		// would not compare equal to nil.
		return nil, err
	}
	return id, nil
}

func (v *Verifier) verify(ctx context.Context, token string) (*Identity, *Error) {
	if token == "" {
		return nil, &Error{Reason: ReasonMissing}
	}
	if len(token) > v.maxBytes {
		return nil, fail(ReasonMalformed, "token of %d bytes exceeds the limit of %d", len(token), v.maxBytes)
	}
	if v.cache == nil {
		id, _, _, e := v.check(ctx, token)
		return id, e
	}
	sum := sha256.Sum256([]byte(token))
	if id, e, hit := v.cached(ctx, &sum); hit {
		return id, e
	}
	id, kid, key, e := v.check(ctx, token)
	if e == nil {
		v.remember(&sum, id, kid, key)
	}
	return id, e
}

// check verifies token fully and also returns the kid and key that
// verified it.
func (v *Verifier) check(ctx context.Context, token string) (*Identity, string, *keyEntry, *Error) {
	c, e := splitCompact(token)
	if e != nil {
		return nil, "", nil, e
	}
	h, e := parseHeader(c.header)
	if e != nil {
		return nil, "", nil, e
	}
	alg, e := v.algorithm(h)
	if e != nil {
		return nil, "", nil, e
	}
	if h.hasTyp && !strings.EqualFold(string(h.typ), "JWT") && !strings.EqualFold(string(h.typ), "at+jwt") {
		return nil, "", nil, fail(ReasonHeader, "typ %s not accepted", quoteParam(string(h.typ)))
	}
	if alg == algRS256 && len(h.kid) == 0 {
		return nil, "", nil, fail(ReasonHeader, "no kid")
	}
	kid := string(h.kid)
	if v.revs != nil && v.revs.KeyRevoked(kid) {
		// Before the key is looked up: the key source may have dropped
		// it already, which would read as an unknown kid.
		return nil, "", nil, fail(ReasonKeyRevoked, "kid %s is on the revocation list", quoteParam(kid))
	}
	key, err := v.entry(ctx, kid)
	if err != nil {
		return nil, "", nil, &Error{Reason: ReasonUnknownKey, Err: fmt.Errorf("kid %s: %w", quoteParam(kid), err)}
	}
	if err := key.fitFor(alg); err != nil {
		return nil, "", nil, &Error{Reason: ReasonAlgorithm, Err: fmt.Errorf("kid %s: %w", quoteParam(kid), err)}
	}
	if !checkSignature(alg, key, c.signingInput, c.signature) {
		return nil, "", nil, fail(ReasonSignature, "%s signature does not match kid %s", alg, quoteParam(kid))
	}
	id, e := v.claims(c.payload)
	if e == nil && v.revs != nil {
		e = revokedError(v.revs.refusal(kid, id.SessionID, v.now()), kid, id.SessionID)
	}
	if e != nil {
		return nil, "", nil, e
	}
	return id, kid, key, nil
}

// revokedError returns the error for the revocation list's refusal r of a
// token with kid and sid, or nil when r is "".
func revokedError(r Reason, kid, sid string) *Error {
	switch r {
	case "":
		return nil
	case ReasonSessionRevoked:
		return fail(r, "sid %s is on the revocation list", quoteParam(sid))
	case ReasonKeyRevoked:
		return fail(r, "kid %s is on the revocation list", quoteParam(kid))
	default:
		return fail(r, "the revocation list is stale and the verifier fails closed")
	}
}

// algorithm returns the header's alg as one of the allowed constants.
func (v *Verifier) algorithm(h joseHeader) (string, *Error) {
	if !h.hasAlg {
		return "", fail(ReasonHeader, "no alg")
	}
	switch {
	case v.rs256 && string(h.alg) == algRS256:
		return algRS256, nil
	case v.hs256 && string(h.alg) == algHS256:
		return algHS256, nil
	case strings.EqualFold(string(h.alg), "none"):
		return "", fail(ReasonAlgorithm, "unsigned token (alg %s)", quoteParam(string(h.alg)))
	}
	return "", fail(ReasonAlgorithm, "alg %s not allowed", quoteParam(string(h.alg)))
}

// entry finds the prepared key for kid. A source of this package hands it
// out directly; for a foreign source the conversion is cached per key.
func (v *Verifier) entry(ctx context.Context, kid string) (*keyEntry, error) {
	return entryOf(ctx, v.src, &v.keys, kid)
}

// checkSignature verifies sig over input with key, which fitFor has
// already approved for alg.
func checkSignature(alg string, key *keyEntry, input, sig []byte) bool {
	switch alg {
	case algRS256:
		sum := sha256.Sum256(input)
		return rsa.VerifyPKCS1v15(key.rsa, crypto.SHA256, sum[:], sig) == nil
	case algHS256:
		mac := hmac.New(sha256.New, key.secret)
		mac.Write(input)
		return hmac.Equal(mac.Sum(nil), sig)
	}
	return false
}

// claims decodes the verified payload and checks it.
func (v *Verifier) claims(payload []byte) (*Identity, *Error) {
	if p := bytes.TrimLeft(payload, " \t\r\n"); len(p) == 0 || p[0] != '{' {
		return nil, fail(ReasonMalformed, "payload is not a JSON object")
	}
	var cs claimSet
	if err := json.Unmarshal(payload, &cs); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fail(ReasonMalformed, "payload: %w", err)
		}
		return nil, fail(ReasonClaims, "%w", err)
	}
	if cs.Sub == "" {
		return nil, fail(ReasonClaims, "no sub")
	}
	if !cs.Exp.set {
		return nil, fail(ReasonClaims, "no exp")
	}
	now := v.now()
	if !cs.Exp.t.Add(v.skew).After(now) {
		return nil, fail(ReasonExpired, "expired at %s", cs.Exp.t.Format(time.RFC3339))
	}
	late := now.Add(v.skew)
	if cs.Nbf.set && cs.Nbf.t.After(late) {
		return nil, fail(ReasonNotYetValid, "not before %s", cs.Nbf.t.Format(time.RFC3339))
	}
	if cs.Iat.set && cs.Iat.t.After(late) {
		return nil, fail(ReasonNotYetValid, "issued in the future at %s", cs.Iat.t.Format(time.RFC3339))
	}
	if cs.Iss != v.issuer {
		return nil, fail(ReasonIssuer, "iss %s", quoteParam(cs.Iss))
	}
	if !cs.Aud.contains(v.audience) {
		return nil, fail(ReasonAudience, "aud does not contain the configured audience")
	}
	return &Identity{
		Subject:        cs.Sub,
		Role:           cs.Role,
		TenantID:       cs.TenantID,
		OrganizationID: cs.OrganizationID,
		SessionID:      cs.Sid,
		TokenID:        cs.Jti,
		Issuer:         cs.Iss,
		Audience:       cs.Aud.list,
		IssuedAt:       cs.Iat.t,
		NotBefore:      cs.Nbf.t,
		ExpiresAt:      cs.Exp.t,
	}, nil
}
