package webhook

import (
	"encoding/json"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// fields lists, per event type, what a delivery's "data" holds (see Body).
var fields = map[string][]string{
	"user.registered":          {"user_id"},
	"user.logged_in":           {"user_id", "session_id", "device_id"},
	"login.failed":             {"user_id", "reason"},
	"user.logged_out":          {"user_id", "session_id"},
	"user.logged_out_all":      {"user_id", "session_id", "revoked_sessions"},
	"password.changed":         {"user_id", "session_id", "revoked_sessions"},
	"password.reset_requested": {"user_id", "outcome"},
	"password.reset":           {"user_id", "revoked_sessions"},
	"email.verified":           {"user_id"},
	"refresh_token.used":       {"user_id", "session_id", "reuse_within_leeway"},
	"refresh_token.reused":     {"user_id", "session_id", "revoked_sessions"},
	"session.revoked":          {"user_id", "session_id", "actor_id", "reason", "revoked_sessions"},
	"user.disabled":            {"user_id", "actor_id", "revoked_sessions", "via"},
	"user.enabled":             {"user_id", "actor_id", "via"},
	"signing_key.rotated":      {"actor_id", "kid", "retired", "activate_in_seconds"},
	"signing_key.revoked":      {"actor_id", "kid"},
}

// payload is the body of a delivery, its fields in this order.
type payload struct {
	ID        string                     `json:"id"`
	Type      string                     `json:"type"`
	CreatedAt string                     `json:"created_at"`
	Data      map[string]json.RawMessage `json:"data"`
}

// Body returns the body of a delivery of e: {"id", "type", "created_at",
// "data"}, where id is the audit entry's id (the same on every attempt, so
// receivers drop duplicates by it), created_at its time in RFC 3339 UTC,
// and data the fields below for its type. It depends on e alone, so every
// attempt sends the same bytes.
//
// The data of each event type holds identifying fields only,
// fields only, copied from the audit entry (user_id, session_id, actor_id)
// and from its data, each present only when the entry has it. Nothing else
// of an entry is ever sent: not the client's address or user agent, not an
// email address, and never a password, hash, token or secret (the audit
// trail holds none either).
//
//	user.registered           user_id
//	user.logged_in            user_id, session_id, device_id
//	login.failed              user_id (when the account exists), reason
//	user.logged_out           user_id, session_id
//	user.logged_out_all       user_id, session_id, revoked_sessions
//	password.changed          user_id, session_id, revoked_sessions
//	password.reset_requested  user_id (when the account exists), outcome
//	password.reset            user_id, revoked_sessions
//	email.verified            user_id
//	refresh_token.used        user_id, session_id, reuse_within_leeway
//	refresh_token.reused      user_id, session_id, revoked_sessions
//	session.revoked           user_id, session_id, actor_id, reason, revoked_sessions
//	user.disabled             user_id, actor_id, revoked_sessions, via
//	user.enabled              user_id, actor_id, via
//	signing_key.rotated       actor_id, kid, retired, activate_in_seconds
//	signing_key.revoked       actor_id, kid
//
// user_id, session_id and actor_id are strings (UUIDs); kid is a string,
// retired a list of kids; revoked_sessions and activate_in_seconds are
// numbers; reuse_within_leeway is a boolean; reason, outcome and via are
// short machine-readable strings.
func Body(e store.AuditEvent) ([]byte, error) {
	var extra map[string]json.RawMessage
	if len(e.Data) > 0 {
		// An entry whose data is not an object contributes nothing from it.
		_ = json.Unmarshal(e.Data, &extra)
	}
	data := map[string]json.RawMessage{}
	for _, f := range fields[e.Type] {
		var v string
		switch f {
		case "user_id":
			v = e.UserID
		case "session_id":
			v = e.SessionID
		case "actor_id":
			v = e.ActorID
		default:
			if raw, ok := extra[f]; ok && string(raw) != "null" {
				data[f] = raw
			}
			continue
		}
		if v != "" {
			data[f], _ = json.Marshal(v) // a string always marshals
		}
	}
	return json.Marshal(payload{
		ID: e.ID, Type: e.Type, CreatedAt: e.OccurredAt.UTC().Format(time.RFC3339Nano), Data: data,
	})
}
