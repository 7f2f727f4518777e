package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// wantFieldError checks that a validation problem names field with code.
func wantFieldError(t *testing.T, what string, r response, field, code string) {
	t.Helper()
	errs, _ := r.json(t)["errors"].([]any)
	for _, e := range errs {
		if m, _ := e.(map[string]any); m["field"] == field && m["code"] == code {
			return
		}
	}
	t.Errorf("%s: errors = %v, want one on %s with code %s", what, errs, field, code)
}

// A password long enough and on no list but easy to guess is refused with
// too_weak: 400 at register, 422 at change, like every policy failure.
func TestPasswordStrength(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		email := uniqueEmail() // user<n>-<nanos>@example.com
		local, _, _ := strings.Cut(email, "-")
		for _, pw := range []string{
			"password1234567", "123456789012345", "aaaaaaaaaaaa", "qwertyuiopasdfgh",
			email + "1", "example" + local + "2024",
		} {
			r := do(t, "POST", is.base+"/v1/register", map[string]string{"email": email, "password": pw})
			wantProblem(t, "register with "+pw, r, http.StatusBadRequest, "validation_failed")
			wantFieldError(t, "register with "+pw, r, "password", "too_weak")
		}

		register(t, is, email)
		tok := login(t, is, email, strongPassword, "laptop")
		r := do(t, "POST", is.base+"/v1/password/change",
			map[string]string{"current_password": strongPassword, "new_password": "qwertyuiopasdfgh"}, bearer(tok.Access)...)
		wantProblem(t, "change to a keyboard row", r, http.StatusUnprocessableEntity, "validation_failed")
		wantFieldError(t, "change to a keyboard row", r, "new_password", "too_weak")

		wantStatus(t, "change to a passphrase", do(t, "POST", is.base+"/v1/password/change",
			map[string]string{"current_password": strongPassword, "new_password": "an entirely new passphrase"}, bearer(tok.Access)...),
			http.StatusNoContent)
	})
}
