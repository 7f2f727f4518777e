package issuerapi

import (
	"context"

	"net/http"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/pkg/verify"
)

type registerRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
}

func (a *API) register(w http.ResponseWriter, r *http.Request) {
	a.idempotent(w, r, "register", func(body []byte) (int, any, error) {
		var req registerRequest
		if err := decodeJSON(body, &req); err != nil {
			return 0, nil, err
		}
		u, err := a.auth.Register(r.Context(), auth.RegisterInput{Email: req.Email, Password: req.Password, Name: req.Name}, a.meta(r))
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, userView(u), nil
	})
}

type loginRequest struct {
	Email      string `json:"email"`
	Password   string `json:"password"`
	DeviceID   string `json:"device_id"`
	DeviceName string `json:"device_name"`
}

func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	if req.Email == "" || req.Password == "" {
		e := errMalformed("email and password are required.")
		for f, v := range map[string]string{"email": req.Email, "password": req.Password} {
			if v == "" {
				e.Fields = append(e.Fields, apperr.FieldError{Field: f, Code: "required", Message: "This field is required."})
			}
		}
		a.writeError(w, r, e)
		return
	}
	pair, err := a.auth.Login(r.Context(), auth.LoginInput{
		Email: req.Email, Password: req.Password, DeviceID: req.DeviceID, DeviceName: req.DeviceName,
	}, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.loggedIn(r, req.Email)
	a.writeTokens(w, r, pair)
}

type refreshRequest struct {
	RefreshToken string `json:"refresh_token"`
}

// refreshToken reads the refresh token: from the refresh cookie of a
// browser request without a body, else from the body.
func (a *API) refreshToken(w http.ResponseWriter, r *http.Request) (string, error) {
	if tok, fromCookie, err := a.cookieRefreshToken(r); fromCookie {
		return tok, err
	}
	var req refreshRequest
	if err := a.decode(w, r, &req); err != nil {
		return "", err
	}
	if req.RefreshToken == "" {
		e := errMalformed("refresh_token is required.")
		e.Fields = []apperr.FieldError{{Field: "refresh_token", Code: "required", Message: "This field is required."}}
		return "", e
	}
	return req.RefreshToken, nil
}

func (a *API) refresh(w http.ResponseWriter, r *http.Request) {
	tok, err := a.refreshToken(w, r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	pair, err := a.auth.Refresh(r.Context(), tok, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeTokens(w, r, pair)
}

func (a *API) logout(w http.ResponseWriter, r *http.Request) {
	tok, err := a.refreshToken(w, r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.auth.Logout(r.Context(), tok, a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	if a.browser(r) {
		a.clearCookies(w)
	}
	w.WriteHeader(http.StatusNoContent)
}

// identity is the caller established by the authentication step; protected
// routes never run without it.
func identity(r *http.Request) *verify.Identity {
	id, _ := verify.FromContext(r.Context())
	return id
}

func (a *API) logoutAll(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	if err := a.auth.LogoutAll(r.Context(), id.Subject, id.SessionID, a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	if a.browser(r) {
		a.clearCookies(w)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) me(w http.ResponseWriter, r *http.Request) {
	u, err := a.auth.Me(r.Context(), identity(r).Subject)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	a.writeJSON(w, r, http.StatusOK, userView(u))
}

func (a *API) sessions(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	ss, err := a.auth.Sessions(r.Context(), id.Subject, id.SessionID)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	a.writeJSON(w, r, http.StatusOK, struct {
		Sessions []sessionJSON `json:"sessions"`
	}{views(ss, sessionView)})
}

func (a *API) revokeSession(w http.ResponseWriter, r *http.Request) {
	if err := a.auth.RevokeSession(r.Context(), identity(r).Subject, r.PathValue("id"), a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	// A replica that cannot open the key signing now (another replica
	// sealed it under a key-encryption key this one does not hold, midway
	// through a rolling --kek-file change) answers every login 500: the
	// load balancer is to send them elsewhere.
	for _, check := range []struct {
		failed string
		run    func(context.Context) error
	}{
		{"health: database does not answer", func(ctx context.Context) error { return pingWithin(ctx, a.db) }},
		{"health: cannot sign tokens", a.keys.CanSign},
	} {
		if err := check.run(ctx); err != nil {
			a.log.WarnContext(r.Context(), check.failed, "err", err)
			a.writeRaw(w, http.StatusServiceUnavailable, []byte(`{"status":"unavailable"}`+"\n"))
			return
		}
	}
	a.writeRaw(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

// pingWithin is db.Ping bounded by ctx even where the driver is not: lib/pq
// ignores the context while it connects, so a database host that drops
// packets would hold the health check for the whole connect timeout. The
// ping goes on in the background until the driver gives up.
func pingWithin(ctx context.Context, db Pinger) error {
	done := make(chan error, 1)
	go func() { done <- db.Ping(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *API) jwks(w http.ResponseWriter, r *http.Request) {
	set, err := a.keys.JWKS(r.Context())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", cacheControl(a.cfg.JWKSMaxAge))
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(set)
}

func (a *API) discovery(w http.ResponseWriter, r *http.Request) {
	base := a.cfg.IssuerURL
	w.Header().Set("Cache-Control", cacheControl(a.cfg.JWKSMaxAge))
	a.writeJSON(w, r, http.StatusOK, map[string]any{
		"issuer":                                base,
		"jwks_uri":                              base + "/.well-known/jwks.json",
		"token_endpoint":                        base + "/v1/login",
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"subject_types_supported":               []string{"public"},
		"response_types_supported":              []string{"token"},
		"claims_supported":                      []string{"iss", "aud", "sub", "role", "iat", "nbf", "exp", "jti", "sid", "tenant_id", "organization_id"},
		"userinfo_endpoint":                     base + "/v1/me",
		"revocation_endpoint":                   base + "/v1/logout",
	})
}

func cacheControl(maxAge time.Duration) string {
	return "public, max-age=" + itoa(int64(maxAge/time.Second))
}

type changePasswordRequest struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

func (a *API) changePassword(w http.ResponseWriter, r *http.Request) {
	var req changePasswordRequest
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	id := identity(r)
	if err := a.auth.ChangePassword(r.Context(), id.Subject, id.SessionID, auth.ChangePasswordInput{
		Current: req.CurrentPassword, New: req.NewPassword,
	}, a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// acceptedMessage is the one answer of forgot-password, whatever the email.
var acceptedMessage = struct {
	Message string `json:"message"`
}{"If an account with this email exists, a password-reset link has been sent to it."}

func (a *API) forgotPassword(w http.ResponseWriter, r *http.Request) {
	a.idempotent(w, r, "password_forgot", func(body []byte) (int, any, error) {
		var req struct {
			Email string `json:"email"`
		}
		if err := decodeJSON(body, &req); err != nil {
			return 0, nil, err
		}
		if throttled(r) {
			// Over the account's cap: the same answer, and no mail.
			return http.StatusAccepted, acceptedMessage, nil
		}
		if err := a.auth.ForgotPassword(r.Context(), req.Email, a.meta(r)); err != nil {
			return 0, nil, err
		}
		return http.StatusAccepted, acceptedMessage, nil
	})
	// The lookup starts when this handler returns; the answer goes on the
	// wire first, so the client's timing cannot include it.
	_ = http.NewResponseController(w).Flush()
}

func (a *API) resetPassword(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token       string `json:"token"`
		NewPassword string `json:"new_password"`
	}
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	email, err := a.auth.ResetPassword(r.Context(), req.Token, req.NewPassword, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.passwordReset(r, email)
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) verifyEmail(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	if err := a.decode(w, r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.auth.VerifyEmail(r.Context(), req.Token, a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) resendVerification(w http.ResponseWriter, r *http.Request) {
	if err := a.auth.ResendVerification(r.Context(), identity(r).Subject, a.meta(r)); err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusAccepted, struct {
		Message string `json:"message"`
	}{"A verification mail is on its way unless the address is verified already."})
}
