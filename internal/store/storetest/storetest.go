// Package storetest owns the conformance suite of the storage contract: every
// rule written in the doc comments of package store, checked against a real
// backend. Backends run it from their own tests with RunTests.
package storetest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/palisade-auth/palisade/internal/store"
)

// subtest is one conformance test; it gets a fresh, empty store.
type subtest struct {
	name string
	run  func(t *testing.T, s store.Store)
}

// RunTests runs the conformance suite against fresh stores made by open.
// Each subtest calls open itself so tests do not share state (open returns
// an empty, migrated store and registers its own cleanup).
func RunTests(t *testing.T, open func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Users", userTests},
		{"Sessions", sessionTests},
		{"Login", loginTests},
		{"RefreshTokens", tokenTests},
		{"InTx", txTests},
		{"WithUser", userTxTests},
		{"Audit", auditTests},
		{"SigningKeys", keyTests},
		{"Idempotency", idempotencyTests},
		{"Account", accountTests},
		{"Admin", adminTests},
		{"Webhooks", webhookTests},
		{"Revocations", revocationTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
			}
		})
	}
}

// t0 is "now" in every test. It carries microseconds, the precision both
// databases keep, so a backend that drops them fails.
var t0 = time.Date(2025, time.March, 4, 5, 6, 7, 891234000, time.UTC)

// at returns t0 moved by d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// newID returns a fresh UUIDv7, as the product makes them.
func newID(t *testing.T) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatalf("uuid.NewV7() = %v", err)
	}
	return id.String()
}

// newHash returns a fresh SHA-256 in hex, the stored form of a token.
func newHash(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("rand.Read = %v", err)
	}
	sum := sha256.Sum256(b[:])
	return hex.EncodeToString(sum[:])
}

// newUser creates a user with every field set; mods adjust it first.
func newUser(t *testing.T, q store.Queries, mods ...func(*store.User)) store.User {
	t.Helper()
	id := newID(t)
	local := "User." + id[len(id)-12:]
	u := store.User{
		ID:              id,
		Email:           local + "@Example.COM",
		EmailNormalized: strings.ToLower(local + "@example.com"),
		PasswordHash:    "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2g",
		Name:            "Ada Lovelace",
		Role:            "user",
		Status:          store.StatusEnabled,
		EmailVerifiedAt: ptr(at(-24 * time.Hour)),
		TenantID:        "tenant-1",
		OrganizationID:  "org-1",
		CreatedAt:       at(-48 * time.Hour),
		UpdatedAt:       at(-48 * time.Hour),
	}
	for _, m := range mods {
		m(&u)
	}
	if err := q.CreateUser(t.Context(), u); err != nil {
		t.Fatalf("CreateUser(%s) = %v, want nil", u.ID, err)
	}
	return u
}

// newSession creates an active session of userID; mods adjust it first.
func newSession(t *testing.T, st store.Store, userID string, mods ...func(*store.Session)) store.Session {
	t.Helper()
	s := store.Session{
		ID:           newID(t),
		UserID:       userID,
		DeviceID:     "device-" + newID(t),
		DeviceName:   "Ada's laptop",
		UserAgent:    "agent/1.0",
		IP:           "192.0.2.1",
		CreatedAt:    at(-time.Hour),
		LastUsedAt:   at(-time.Hour),
		ExpiresAt:    at(14 * 24 * time.Hour),
		MaxExpiresAt: at(90 * 24 * time.Hour),
	}
	for _, m := range mods {
		m(&s)
	}
	if err := st.WithUser(t.Context(), userID, func(tx store.UserTx) error { return tx.CreateSession(t.Context(), s) }); err != nil {
		t.Fatalf("CreateSession(%s) = %v, want nil", s.ID, err)
	}
	return s
}

// newToken creates the first refresh token of sess; mods adjust it first.
func newToken(t *testing.T, st store.Store, sess store.Session, mods ...func(*store.RefreshToken)) store.RefreshToken {
	t.Helper()
	tok := store.RefreshToken{
		Hash:      newHash(t),
		SessionID: sess.ID,
		UserID:    sess.UserID,
		IssuedAt:  at(-time.Hour),
		ExpiresAt: at(14 * 24 * time.Hour),
	}
	for _, m := range mods {
		m(&tok)
	}
	if err := st.WithUser(t.Context(), tok.UserID, func(tx store.UserTx) error { return tx.CreateRefreshToken(t.Context(), tok) }); err != nil {
		t.Fatalf("CreateRefreshToken(%s) = %v, want nil", tok.Hash, err)
	}
	return tok
}

// childOf returns the token that would replace parent when rotated at now.
func childOf(t *testing.T, parent store.RefreshToken, now time.Time) store.RefreshToken {
	t.Helper()
	return store.RefreshToken{
		Hash:       newHash(t),
		SessionID:  parent.SessionID,
		UserID:     parent.UserID,
		ParentHash: parent.Hash,
		IssuedAt:   now,
		ExpiresAt:  now.Add(14 * 24 * time.Hour),
	}
}

// mustSession reads a session that must exist.
func mustSession(t *testing.T, q store.Queries, id string) store.Session {
	t.Helper()
	s, err := q.SessionByID(t.Context(), id)
	if err != nil {
		t.Fatalf("SessionByID(%s) = %v, want nil", id, err)
	}
	return s
}

// mustToken reads a refresh token that must exist.
func mustToken(t *testing.T, q store.Queries, hash string) store.RefreshToken {
	t.Helper()
	tok, err := q.RefreshTokenByHash(t.Context(), hash)
	if err != nil {
		t.Fatalf("RefreshTokenByHash(%s) = %v, want nil", hash, err)
	}
	return tok
}

// wantErr reports unless errors.Is(err, want); want nil means no error.
func wantErr(t *testing.T, call string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("%s = %v, want %v", call, err, want)
	}
}
