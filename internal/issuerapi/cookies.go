package issuerapi

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/pkg/verify"
)

// RefreshCookie holds the refresh token of a browser client. Like the
// access and CSRF cookies it is __Host- prefixed (Secure, host-only, path /).
const RefreshCookie = verify.DefaultRefreshCookie

// Cookie delivery (API.md section 2, seed "Cookies"): a request whose Origin
// is one of --browser-origins is a browser client. Its login and refresh
// answers put the tokens in HttpOnly cookies instead of the body, so page
// scripts never hold them, and return a CSRF token the page must echo in
// the X-CSRF-Token header of every state-changing request the cookies
// authenticate. Every other client gets the tokens in the body, unchanged.

// browser reports whether the request comes from an allowed browser origin.
func (a *API) browser(r *http.Request) bool {
	return len(a.cookies.Origins) > 0 && a.cookies.AllowedOrigin(r)
}

// browserTokenJSON is the token response of a browser client: the tokens
// themselves travel in cookies.
type browserTokenJSON struct {
	ExpiresIn        int64  `json:"expires_in"`
	TokenType        string `json:"token_type"`
	RefreshExpiresIn int64  `json:"refresh_expires_in"`
	SessionID        string `json:"session_id"`
	CSRFToken        string `json:"csrf_token"`
}

// writeTokens answers a login or refresh: in the body, or for a browser
// client in cookies.
func (a *API) writeTokens(w http.ResponseWriter, r *http.Request, p auth.TokenPair) {
	noStore(w)
	if !a.browser(r) {
		a.writeJSON(w, r, http.StatusOK, tokenView(p))
		return
	}
	csrf := ""
	if c, err := r.Cookie(a.cookies.CSRFCookie); err == nil && len(c.Value) == 43 {
		csrf = c.Value // keep the page's token across refreshes
	} else {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			a.writeError(w, r, apperr.Internal(err))
			return
		}
		csrf = base64.RawURLEncoding.EncodeToString(b)
	}
	http.SetCookie(w, hostCookie(a.cookies.AccessCookie, p.AccessToken, p.ExpiresIn))
	http.SetCookie(w, hostCookie(RefreshCookie, p.RefreshToken, p.RefreshExpiresIn))
	http.SetCookie(w, hostCookie(a.cookies.CSRFCookie, csrf, p.RefreshExpiresIn))
	v := tokenView(p)
	a.writeJSON(w, r, http.StatusOK, browserTokenJSON{
		ExpiresIn: v.ExpiresIn, TokenType: v.TokenType, RefreshExpiresIn: v.RefreshExpiresIn, SessionID: v.SessionID, CSRFToken: csrf,
	})
}

// clearCookies deletes the browser cookies (at logout).
func (a *API) clearCookies(w http.ResponseWriter) {
	for _, name := range []string{a.cookies.AccessCookie, RefreshCookie, a.cookies.CSRFCookie} {
		http.SetCookie(w, hostCookie(name, "", -1))
	}
}

// hostCookie is a __Host- cookie: Secure, HttpOnly, SameSite=Lax, path /,
// no Domain. maxAge <= 0 deletes it. A part of a second rounds up: net/http
// sends no Max-Age at all for 0, which would make the cookie outlive its
// token as a browser-session cookie.
func hostCookie(name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	if maxAge <= 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int((maxAge + time.Second - 1) / time.Second)
	}
	return c
}

// cookieRefreshToken returns the refresh cookie of a request that sends no
// body, the browser form of refresh and logout. Such a request is
// authenticated by a cookie, so it must pass the CSRF rule.
func (a *API) cookieRefreshToken(r *http.Request) (string, bool, error) {
	if len(a.cookies.Origins) == 0 {
		return "", false, nil
	}
	if r.ContentLength != 0 {
		return "", false, nil
	}
	tok, _, found, err := a.cookies.Authenticate(r, verify.AuthRequest{Method: r.Method, Cookie: RefreshCookie, CookieOnly: true})
	if errors.Is(err, verify.ErrCSRF) {
		return "", true, errCSRF()
	}
	return tok, found, nil
}

func errCSRF() error {
	return apperr.New(apperr.KindForbidden, "csrf_failed", "A request authenticated by a cookie needs an allowed Origin and the CSRF token header.")
}

// cookieAuth is the browser configuration of the API's authentication step.
func cookieAuth(origins []string) verify.CookieAuth {
	return verify.CookieAuth{
		AccessCookie: verify.DefaultAccessCookie, CSRFCookie: verify.DefaultCSRFCookie,
		CSRFHeader: verify.DefaultCSRFHeader, Origins: origins,
	}
}
