package issuerapi

import (
	"net/http"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
)

// keyRoutes are the admin endpoints of the signing-key lifecycle (API.md
// section 9).
func (a *API) keyRoutes() []route {
	return []route{
		{pattern: "GET /v1/admin/keys", protected: true, handler: a.admin(a.listKeys)},
		{pattern: "POST /v1/admin/keys/rotate", protected: true, handler: a.admin(a.rotateKey)},
		{pattern: "POST /v1/admin/keys/{kid}/revoke", protected: true, handler: a.admin(a.revokeKey)},
	}
}

// keyJSON is the key object; never private material.
type keyJSON struct {
	KID         string  `json:"kid"`
	State       string  `json:"state"`
	CreatedAt   string  `json:"created_at"`
	ActivatesAt *string `json:"activates_at,omitempty"`
	RetiresAt   *string `json:"retires_at,omitempty"`
	RevokedAt   *string `json:"revoked_at,omitempty"`
}

func keyView(k auth.KeyInfo) keyJSON {
	activates := k.ActivatesAt
	return keyJSON{
		KID: k.KID, State: k.State, CreatedAt: rfc3339(k.CreatedAt),
		ActivatesAt: optTime(&activates), RetiresAt: optTime(k.RetiresAt), RevokedAt: optTime(k.RevokedAt),
	}
}

// KeyObject is the API's key object of k, for the command line.
func KeyObject(k auth.KeyInfo) any { return keyView(k) }

func (a *API) listKeys(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	ks, err := a.auth.AdminKeys(r.Context(), actor)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, struct {
		Keys []keyJSON `json:"keys"`
	}{views(ks, keyView)})
}

// rotateKeyRequest: activate_in in seconds; absent is --activate-in.
type rotateKeyRequest struct {
	ActivateIn *int64 `json:"activate_in"`
}

func (a *API) rotateKey(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	var req rotateKeyRequest
	// A rotation without options may come without a body.
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		if err := a.decode(w, r, &req); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	var in *time.Duration
	if req.ActivateIn != nil {
		d := time.Duration(-1) // out of range: refused by the service
		if s := *req.ActivateIn; s >= 0 && s <= maxOverlapSeconds {
			d = time.Duration(s) * time.Second
		}
		in = &d
	}
	k, err := a.auth.AdminRotateKey(r.Context(), actor, in, a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/admin/keys")
	a.writeJSON(w, r, http.StatusCreated, keyView(k))
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request, actor auth.Actor) {
	k, err := a.auth.AdminRevokeKey(r.Context(), actor, r.PathValue("kid"), a.meta(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, r, http.StatusOK, keyView(k))
}
