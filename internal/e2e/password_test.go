package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/store"
)

func TestPasswordChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		email := uniqueEmail()
		register(t, is, email)
		laptop := login(t, is, email, strongPassword, "laptop")
		phone := login(t, is, email, strongPassword, "phone")
		change := func(tok, current, next string) response {
			return do(t, "POST", is.base+"/v1/password/change",
				map[string]string{"current_password": current, "new_password": next}, bearer(tok)...)
		}
		const newPassword = "a different long passphrase"

		wantProblem(t, "change without a token", do(t, "POST", is.base+"/v1/password/change",
			map[string]string{"current_password": strongPassword, "new_password": newPassword}), http.StatusUnauthorized, "invalid_token")
		wantProblem(t, "wrong current password", change(laptop.Access, "not the password at all", newPassword), http.StatusForbidden, "current_password_incorrect")
		weak := change(laptop.Access, strongPassword, "short")
		wantProblem(t, "weak new password", weak, http.StatusUnprocessableEntity, "validation_failed")
		if errs, _ := weak.json(t)["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != "new_password" {
			t.Errorf("weak new password: errors = %v, want one on new_password", weak.json(t)["errors"])
		}
		wantProblem(t, "missing fields", do(t, "POST", is.base+"/v1/password/change", map[string]string{}, bearer(laptop.Access)...),
			http.StatusBadRequest, "malformed_request")
		wantProblem(t, "wrong type", do(t, "POST", is.base+"/v1/password/change", `{"current_password": 1, "new_password": true}`, bearer(laptop.Access)...),
			http.StatusBadRequest, "malformed_request")
		// Nothing above changed anything: the sessions still refresh.
		r := refresh(t, is, phone.Refresh)
		wantStatus(t, "refresh before the change", r, http.StatusOK)
		phone.Refresh = r.json(t)["refresh_token"].(string)

		wantStatus(t, "change", change(laptop.Access, strongPassword, newPassword), http.StatusNoContent)

		for name, rt := range map[string]string{"laptop": laptop.Refresh, "phone": phone.Refresh} {
			wantProblem(t, "refresh of the "+name+" session after the change", refresh(t, is, rt), http.StatusUnauthorized, "refresh_token_revoked")
		}
		wantProblem(t, "login with the old password", do(t, "POST", is.base+"/v1/login",
			map[string]string{"email": email, "password": strongPassword}), http.StatusUnauthorized, "invalid_credentials")
		login(t, is, email, newPassword, "laptop")

		st := openStore(t, dbURL)
		u, err := st.UserByEmail(context.Background(), strings.ToLower(email))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.ListAudit(context.Background(), store.AuditFilter{UserID: u.ID, Type: "password.changed"})
		if err != nil || len(evs) != 1 || evs[0].SessionID != laptop.SessionID {
			t.Errorf("audit password.changed = %+v, %v; want one entry for the laptop session", evs, err)
		}
	})
}
