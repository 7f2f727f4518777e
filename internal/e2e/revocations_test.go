package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// feedAnswer is a decoded GET /v1/revocations.
type feedAnswer struct {
	Sessions []struct{ SID, Until string } `json:"sessions"`
	Keys     []struct{ KID, Until string } `json:"keys"`
	Cursor   string                        `json:"cursor"`
	etag     string
}

func readFeed(t *testing.T, is *issuer, after string, headers ...string) (feedAnswer, response) {
	t.Helper()
	url := is.base + "/v1/revocations"
	if after != "" {
		url += "?after=" + after
	}
	r := do(t, "GET", url, nil, headers...)
	var f feedAnswer
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &f); err != nil {
			t.Fatalf("GET %s: body %s: %v", url, r.body, err)
		}
		if f.Cursor == "" {
			t.Fatalf("GET %s: cursor = \"\", want one; body %s", url, r.body)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control = %q, want no-cache", url, cc)
		}
	}
	f.etag = r.header.Get("ETag")
	return f, r
}

// revokedSessions is the sorted sids of a feed answer; it checks each
// until against the window the revocation happened in.
func revokedSessions(t *testing.T, f feedAnswer, from, to time.Time) []string {
	t.Helper()
	var sids []string
	for _, s := range f.Sessions {
		until, err := time.Parse(time.RFC3339, s.Until)
		if err != nil || until.Location() != time.UTC {
			t.Errorf("until %q: not RFC 3339 UTC (%v)", s.Until, err)
		}
		// Revoked between from and to: until = that + 15m access TTL + 30s skew, whole seconds up.
		keep := 15*time.Minute + 30*time.Second
		if until.Before(from.Add(keep).Truncate(time.Second)) || until.After(to.Add(keep+time.Second)) {
			t.Errorf("sid %s until %s, want between %s and %s", s.SID, s.Until, from.Add(keep), to.Add(keep+time.Second))
		}
		sids = append(sids, s.SID)
	}
	slices.Sort(sids)
	return sids
}

func TestRevocationFeed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL)
		adminEmail := uniqueEmail()
		if out, err := is.cli(t, strongPassword+"\n", "users", "create", "--email", adminEmail, "--role", "admin", "--password-stdin"); err != nil {
			t.Fatalf("users create --role admin: %v\n%s", err, out)
		}
		admin := login(t, is, adminEmail, strongPassword, "admin-laptop")
		bystanderEmail := uniqueEmail()
		register(t, is, bystanderEmail)
		bystander := login(t, is, bystanderEmail, strongPassword, "desk")

		for _, tc := range []struct {
			name string
			// revoke ends sessions of a user logged in on laptop and phone
			// and returns the sids that must enter the feed.
			revoke func(t *testing.T, email, id string, laptop, phone tokens) []string
		}{
			{"Logout", func(t *testing.T, _, _ string, laptop, phone tokens) []string {
				wantStatus(t, "logout", do(t, "POST", is.base+"/v1/logout", map[string]string{"refresh_token": laptop.Refresh}), http.StatusNoContent)
				return []string{laptop.SessionID}
			}},
			{"LogoutAll", func(t *testing.T, _, _ string, laptop, phone tokens) []string {
				wantStatus(t, "logout all", do(t, "POST", is.base+"/v1/logout/all", nil, bearer(laptop.Access)...), http.StatusNoContent)
				return []string{laptop.SessionID, phone.SessionID}
			}},
			{"PasswordChange", func(t *testing.T, _, _ string, laptop, phone tokens) []string {
				wantStatus(t, "password change", do(t, "POST", is.base+"/v1/password/change",
					map[string]string{"current_password": strongPassword, "new_password": strongPassword + " again"}, bearer(laptop.Access)...), http.StatusNoContent)
				return []string{laptop.SessionID, phone.SessionID}
			}},
			{"DisableByAdmin", func(t *testing.T, _, id string, laptop, phone tokens) []string {
				wantStatus(t, "disable", do(t, "PATCH", is.base+"/v1/admin/users/"+id, map[string]string{"status": "disabled"}, bearer(admin.Access)...), http.StatusOK)
				return []string{laptop.SessionID, phone.SessionID}
			}},
			{"RefreshTokenReuse", func(t *testing.T, _, _ string, laptop, phone tokens) []string {
				wantStatus(t, "refresh", refresh(t, is, laptop.Refresh), http.StatusOK)
				wantProblem(t, "refresh with the rotated token", refresh(t, is, laptop.Refresh), http.StatusUnauthorized, "refresh_token_revoked")
				return []string{laptop.SessionID, phone.SessionID}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				email := uniqueEmail()
				id := register(t, is, email)["id"].(string)
				laptop := login(t, is, email, strongPassword, "laptop")
				phone := login(t, is, email, strongPassword, "phone")
				before, _ := readFeed(t, is, "")

				from := time.Now().UTC()
				want := tc.revoke(t, email, id, laptop, phone)
				to := time.Now().UTC()
				slices.Sort(want)

				delta, r := readFeed(t, is, before.Cursor)
				wantStatus(t, "GET ?after=<cursor from before>", r, http.StatusOK)
				if got := revokedSessions(t, delta, from, to); !slices.Equal(got, want) {
					t.Errorf("GET ?after=<cursor from before> sessions = %v, want exactly %v", got, want)
				}
				if len(delta.Keys) != 0 {
					t.Errorf("GET ?after=<cursor from before> keys = %v, want none", delta.Keys)
				}
				full, _ := readFeed(t, is, "")
				got := revokedSessions(t, full, time.Time{}, to)
				for _, sid := range want {
					if !slices.Contains(got, sid) {
						t.Errorf("GET /v1/revocations = %v, want %s in it", got, sid)
					}
				}
				if slices.Contains(got, bystander.SessionID) {
					t.Errorf("GET /v1/revocations = %v, want no session of another user (%s)", got, bystander.SessionID)
				}

				// Nothing new: the same ETag, 304 with If-None-Match.
				again, r := readFeed(t, is, delta.Cursor, "If-None-Match", delta.etag)
				wantStatus(t, "GET ?after=<latest cursor> with If-None-Match", r, http.StatusNotModified)
				if again.etag != delta.etag || len(r.body) != 0 {
					t.Errorf("304: ETag %q body %q, want ETag %q and no body", again.etag, r.body, delta.etag)
				}
				empty, r := readFeed(t, is, delta.Cursor)
				wantStatus(t, "GET ?after=<latest cursor>", r, http.StatusOK)
				if len(empty.Sessions) != 0 || empty.Cursor != delta.Cursor || empty.etag != delta.etag {
					t.Errorf("GET ?after=<latest cursor> = %+v, want no sessions, the same cursor and ETag", empty)
				}
			})
		}

		t.Run("MalformedCursor", func(t *testing.T) {
			for _, after := range []string{"not-a-cursor", "cjE", "%00"} {
				_, r := readFeed(t, is, after)
				wantProblem(t, "GET ?after="+after, r, http.StatusBadRequest, "malformed_request")
			}
			r := do(t, "GET", is.base+"/v1/revocations?after=", nil)
			wantProblem(t, "GET ?after=", r, http.StatusBadRequest, "malformed_request")
		})
	})
}
