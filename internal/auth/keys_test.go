package auth_test

import (
	"context"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/store"
)

// keyState returns kid's state in the admin key list ("" when not listed).
func keyState(t *testing.T, f *fixture, kid string) string {
	t.Helper()
	ks, err := f.svc.AdminKeys(context.Background(), auth.Operator())
	if err != nil {
		t.Fatalf("AdminKeys: %v", err)
	}
	for _, k := range ks {
		if k.KID == kid {
			return k.State
		}
	}
	return ""
}

// keyEvents returns the audit entries of typ, newest first.
func keyEvents(t *testing.T, f *fixture, typ string) []store.AuditEvent {
	t.Helper()
	evs, err := f.st.ListAudit(context.Background(), store.AuditFilter{Type: typ, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestAdminKeys(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0, func(c *auth.Config) { c.KeyActivateIn = time.Hour })
		adm := f.admin(t, "keys-admin@example.com")

		rotated, err := f.svc.AdminRotateKey(ctx, adm, nil, auth.Meta{RequestID: "r1"})
		if err != nil {
			t.Fatalf("AdminRotateKey: %v", err)
		}
		if rotated.State != keys.StateNext || !rotated.ActivatesAt.Equal(f.clock.Now().Add(time.Hour)) {
			t.Errorf("AdminRotateKey(default) = %+v, want next, activating after the configured hour", rotated)
		}
		evs := keyEvents(t, f, auth.EventSigningKeyRotated)
		if len(evs) != 1 || evs[0].ActorID != adm.UserID || dataOf(t, evs[0])["via"] != "api" || dataOf(t, evs[0])["kid"] != rotated.KID {
			t.Errorf("signing_key.rotated = %+v, want one by the admin naming %s", evs, rotated.KID)
		}
		bad := -time.Second
		_, err = f.svc.AdminRotateKey(ctx, adm, &bad, auth.Meta{})
		wantCode(t, "AdminRotateKey(negative)", err, "validation_failed")

		// A demoted admin is refused inside the transaction: nothing
		// changes, nothing is recorded.
		if _, err := f.svc.AdminUpdateUser(ctx, auth.Operator(), adm.UserID, auth.UserPatch{Role: ptr(auth.RoleUser)}, auth.Meta{}); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.AdminRevokeKey(ctx, adm, rotated.KID, auth.Meta{})
		wantCode(t, "AdminRevokeKey(demoted admin)", err, "forbidden")
		_, err = f.svc.AdminRotateKey(ctx, adm, nil, auth.Meta{})
		wantCode(t, "AdminRotateKey(demoted admin)", err, "forbidden")
		_, err = f.svc.AdminKeys(ctx, adm)
		wantCode(t, "AdminKeys(demoted admin)", err, "forbidden")
		if got := keyState(t, f, rotated.KID); got != keys.StateNext {
			t.Errorf("state of %s after a demoted admin's revoke = %q, want next", rotated.KID, got)
		}
		if got := len(keyEvents(t, f, auth.EventSigningKeyRevoked)); got != 0 {
			t.Errorf("signing_key.revoked after refused revokes = %d, want 0", got)
		}

		revoked, err := f.svc.AdminRevokeKey(ctx, auth.Operator(), rotated.KID, auth.Meta{})
		if err != nil || revoked.State != keys.StateRevoked {
			t.Fatalf("AdminRevokeKey(operator) = %+v, %v, want revoked", revoked, err)
		}
		evs = keyEvents(t, f, auth.EventSigningKeyRevoked)
		if len(evs) != 1 || dataOf(t, evs[0])["via"] != "cli" || dataOf(t, evs[0])["state"] != keys.StateNext {
			t.Errorf("signing_key.revoked = %+v, want one via cli naming the state it had", evs)
		}
		if _, err := f.svc.AdminRevokeKey(ctx, auth.Operator(), rotated.KID, auth.Meta{}); err != nil {
			t.Errorf("AdminRevokeKey(revoked) = %v, want nil", err)
		}
		if got := len(keyEvents(t, f, auth.EventSigningKeyRevoked)); got != 1 {
			t.Errorf("signing_key.revoked after revoking a revoked key = %d entries, want 1", got)
		}
		_, err = f.svc.AdminRevokeKey(ctx, auth.Operator(), "no-such-kid", auth.Meta{})
		wantCode(t, "AdminRevokeKey(unknown)", err, "not_found")
	})
}

// TestResealSecrets re-seals under a new key-encryption key what the old
// one sealed: a signing key, a queued mail's token and a webhook secret.
func TestResealSecrets(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, 0)
		f.user(t, "reseal@example.com") // queues a verification mail, sealed

		newKEK := make([]byte, keys.KEKSize)
		if _, err := io.ReadFull(rand.Reader, newKEK); err != nil {
			t.Fatal(err)
		}
		ring, err := keys.NewKeyring([][]byte{newKEK, f.kek}, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		d := f.deps
		d.Sealer = ring
		svc := auth.New(d, f.cfg)

		r, err := svc.ResealSecrets(ctx, auth.Operator(), auth.Meta{})
		if err != nil {
			t.Fatalf("ResealSecrets: %v", err)
		}
		if r.Resealed < 2 || r.Current != 0 || r.Failed != 0 {
			t.Errorf("ResealSecrets = %+v, want the signing key and the mail resealed", r)
		}
		onlyNew, err := keys.NewSealer(newKEK, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := f.st.SealedValues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if _, _, err := onlyNew.Reseal(v.Sealed, sealContextOf(v)); err != nil {
				t.Errorf("%s %s after ResealSecrets does not open with the new key alone: %v", v.Kind, v.ID, err)
			}
		}
		again, err := svc.ResealSecrets(ctx, auth.Operator(), auth.Meta{})
		if err != nil || again.Resealed != 0 || again.Current != r.Resealed {
			t.Errorf("ResealSecrets again = %+v, %v, want nothing left to reseal", again, err)
		}

		// Under a key that sealed none of them nothing opens: reported,
		// not touched.
		stranger, err := keys.NewSealer(make([]byte, keys.KEKSize), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		d.Sealer = stranger
		lost, err := auth.New(d, f.cfg).ResealSecrets(ctx, auth.Operator(), auth.Meta{})
		if err != nil || lost.Failed != len(vs) || lost.Resealed != 0 {
			t.Errorf("ResealSecrets with a key that opens nothing = %+v, %v, want all %d failed", lost, err, len(vs))
		}
		if got := len(keyEvents(t, f, auth.EventSecretsResealed)); got != 3 {
			t.Errorf("secrets.resealed entries = %d, want 3", got)
		}
	})
}

// sealContextOf is what a sealed value is bound to.
func sealContextOf(v store.SealedValue) string {
	switch v.Kind {
	case store.SealedMailToken:
		return auth.MailSealContext(v.ID)
	case store.SealedWebhookSecret, store.SealedWebhookPrevious:
		return auth.WebhookSealContext(v.ID)
	}
	return v.ID
}
