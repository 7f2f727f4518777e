package issuerapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
)

// writeJSON encodes v with status. Bodies are encoded before the status is
// sent so that an encoding failure can still become a 500.
func (a *API) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeRaw(w, status, buf.Bytes())
}

// writeChunk is how much of a body goes out under one write deadline: a
// client must take each 256 KiB within ResponseWriteTimeout (17 KiB/s at
// 15 s) to be sent the next, so one that stops reading is cut off and its
// body released, while one that reads slowly gets all of it.
const writeChunk = 256 << 10

// writeRaw sends body, a JSON document, a chunk at a time under the
// response write timeout.
func (a *API) writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	ctl := http.NewResponseController(w)
	for len(body) > 0 {
		if d := a.cfg.ResponseWriteTimeout; d > 0 {
			// A writer without deadlines (a test's recorder) has nothing to hold.
			_ = ctl.SetWriteDeadline(time.Now().Add(d))
		}
		n := min(len(body), writeChunk)
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		body = body[n:]
	}
}

// noStore marks a response that carries a token (RFC 6749 section 5.1).
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

type userJSON struct {
	ID             string `json:"id"`
	Email          string `json:"email"`
	EmailVerified  bool   `json:"email_verified"`
	Role           string `json:"role"`
	Status         string `json:"status"`
	Name           string `json:"name,omitempty"`
	TenantID       string `json:"tenant_id,omitempty"`
	OrganizationID string `json:"organization_id,omitempty"`
	CreatedAt      string `json:"created_at"`
}

// userView is the only way a user leaves the service: never a hash.
func userView(u auth.Account) userJSON {
	return userJSON{
		ID: u.ID, Email: u.Email, EmailVerified: u.EmailVerifiedAt != nil, Role: u.Role, Status: u.Status,
		Name: u.Name, TenantID: u.TenantID, OrganizationID: u.OrganizationID, CreatedAt: rfc3339(u.CreatedAt),
	}
}

type tokenJSON struct {
	AccessToken      string `json:"access_token"`
	RefreshToken     string `json:"refresh_token"`
	ExpiresIn        int64  `json:"expires_in"`
	TokenType        string `json:"token_type"`
	RefreshExpiresIn int64  `json:"refresh_expires_in"`
	SessionID        string `json:"session_id"`
}

func tokenView(p auth.TokenPair) tokenJSON {
	return tokenJSON{
		AccessToken: p.AccessToken, RefreshToken: p.RefreshToken, ExpiresIn: int64(p.ExpiresIn / time.Second),
		TokenType: "Bearer", RefreshExpiresIn: int64(p.RefreshExpiresIn / time.Second), SessionID: p.SessionID,
	}
}

type sessionJSON struct {
	ID         string `json:"id"`
	DeviceID   string `json:"device_id"`
	DeviceName string `json:"device_name,omitempty"`
	UserAgent  string `json:"user_agent,omitempty"`
	IP         string `json:"ip,omitempty"`
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at"`
	ExpiresAt  string `json:"expires_at"`
	Current    bool   `json:"current"`
}

func sessionView(s auth.SessionView) sessionJSON {
	return sessionJSON{
		ID: s.ID, DeviceID: s.DeviceID, DeviceName: s.DeviceName, UserAgent: s.UserAgent, IP: s.IP,
		CreatedAt: rfc3339(s.CreatedAt), LastUsedAt: rfc3339(s.LastUsedAt), ExpiresAt: rfc3339(s.ExpiresAt),
		Current: s.Current,
	}
}
