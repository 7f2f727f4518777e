package auth

import "github.com/palisade-auth/palisade/internal/apperr"

// CodeInvalidToken is the public code of an access token the flows refuse
// (missing, not valid, or its account gone). The transport answers it with
// WWW-Authenticate: Bearer error="invalid_token", matching on this constant.
const CodeInvalidToken = "invalid_token"

func errInvalidToken() error {
	return apperr.New(apperr.KindUnauthenticated, CodeInvalidToken, "The access token is missing or invalid.")
}
