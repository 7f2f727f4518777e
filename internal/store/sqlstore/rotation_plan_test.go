package sqlstore_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestRotationReachesTheTokenByItsKey: however long a session's chain of
// rotated tokens, PostgreSQL finds the token a refresh presents by its
// primary key. Joined to its owner by user_id, the statement was planned
// (on a fresh database) through refresh_tokens_user_live, which holds
// every rotated token of the user, each filtered by hash: a refresh cost
// more the longer its session had lived.
func TestRotationReachesTheTokenByItsKey(t *testing.T) {
	s := testdb.Store(t, testdb.Postgres(t))
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	u := store.User{ID: randomHex(t), Email: "chain@example.com", EmailNormalized: "chain@example.com",
		PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2g", Role: "user",
		Status: store.StatusEnabled, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{ID: randomHex(t), UserID: u.ID, DeviceID: "device", CreatedAt: now, LastUsedAt: now,
		ExpiresAt: now.Add(24 * time.Hour), MaxExpiresAt: now.Add(24 * time.Hour)}
	tok := store.RefreshToken{Hash: randomHex(t), SessionID: sess.ID, UserID: u.ID, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.WithUser(ctx, u.ID, func(tx store.UserTx) error {
		if err := tx.CreateSession(ctx, sess); err != nil {
			return err
		}
		return tx.CreateRefreshToken(ctx, tok)
	}); err != nil {
		t.Fatal(err)
	}
	next := func() store.RotateRequest {
		return store.RotateRequest{Hash: tok.Hash, Now: now,
			Next: store.RefreshToken{Hash: randomHex(t), IssuedAt: now, ExpiresAt: now.Add(time.Hour)}}
	}
	const chain = 200
	for range chain {
		r := next()
		if _, err := s.RotateRefreshToken(ctx, r); err != nil {
			t.Fatalf("rotation: %v", err)
		}
		tok.Hash = r.Next.Hash
	}

	plan, err := s.ExplainRotation(ctx, next())
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "refresh_tokens_user_live") || !strings.Contains(text, "using refresh_tokens_pkey on refresh_tokens rt") {
		t.Errorf("after a chain of %d rotations the rotation does not reach the token by its key:\n%s", chain, text)
	}
}

func randomHex(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
