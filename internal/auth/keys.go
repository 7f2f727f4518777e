package auth

import (
	"context"
	"errors"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/store"
)

// EventSigningKeyRevoked is the audit entry (and webhook event) of a
// revoked signing key; EventSigningKeyRotated is a rotation's.
const EventSigningKeyRevoked = "signing_key.revoked"

// KeyInfo describes a signing key for operators; never private material.
type KeyInfo = keys.Info

// KeyManager runs the signing-key lifecycle; *keys.Manager is one. Each
// change calls record inside its transaction, so the change and its audit
// entry commit together.
type KeyManager interface {
	List(ctx context.Context) ([]keys.Info, error)
	Rotate(ctx context.Context, activateIn time.Duration, record func(q store.Queries, kid string, retired []string) error) (keys.Info, error)
	Revoke(ctx context.Context, kid string, record func(q store.Queries, r keys.Revocation) error) (keys.Info, error)
	Maintain(ctx context.Context, record func(q store.Queries, kid string, retired []string) error) (bool, error)
}

// MaxKeyActivateIn bounds how far ahead a rotation may schedule its key.
const MaxKeyActivateIn = 30 * 24 * time.Hour

func errNoSuchKey() error {
	return apperr.New(apperr.KindNotFound, "not_found", "No such signing key.")
}

// AdminKeys lists the signing keys: published ones, and revoked ones
// until no token they signed can still be valid.
func (s *Service) AdminKeys(ctx context.Context, a Actor) ([]KeyInfo, error) {
	if err := s.authorizeRead(ctx, a); err != nil {
		return nil, err
	}
	ks, err := s.keys.List(ctx)
	if err != nil {
		return nil, apperr.Internal(err)
	}
	return ks, nil
}

// AdminRotateKey creates a signing key that is published at once and
// signs after activateIn (nil: the configured --activate-in); the key
// signing now retires at that instant. The rotation and
// signing_key.rotated, with the acting admin, commit together.
func (s *Service) AdminRotateKey(ctx context.Context, a Actor, activateIn *time.Duration, m Meta) (KeyInfo, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return KeyInfo{}, err
	}
	in := s.cfg.KeyActivateIn
	if activateIn != nil {
		in = *activateIn
	}
	if in < 0 || in > MaxKeyActivateIn {
		e := apperr.New(apperr.KindUnprocessable, "validation_failed", "The rotation is not valid.")
		e.Fields = []apperr.FieldError{{Field: "activate_in", Code: "invalid", Message: "activate_in must be from 0 to 30 days."}}
		return KeyInfo{}, e
	}
	now := s.clock()
	k, err := s.keys.Rotate(ctx, in, func(q store.Queries, kid string, retired []string) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
		return q.AppendAudit(ctx, s.adminEvent(EventSigningKeyRotated, now, m, a, "", rotatedData(kid, retired, in)))
	})
	if err != nil {
		return KeyInfo{}, asAppErr(err)
	}
	return k, nil
}

// AdminRevokeKey takes a signing key out of the JWK set at once. When it
// was signing, the published next key signs from now on (or a fresh one
// when none is published). The revocation and signing_key.revoked, with
// the acting admin, commit together; revoking a revoked key changes
// nothing and records nothing.
func (s *Service) AdminRevokeKey(ctx context.Context, a Actor, kid string, m Meta) (KeyInfo, error) {
	if err := AuthorizeAdmin(a); err != nil {
		return KeyInfo{}, err
	}
	now := s.clock()
	k, err := s.keys.Revoke(ctx, kid, func(q store.Queries, r keys.Revocation) error {
		if err := authorizeWrite(ctx, q, a); err != nil {
			return err
		}
		data := map[string]any{"kid": r.Key.KID, "state": r.Key.State}
		if r.Successor != "" {
			data["successor"] = r.Successor
		}
		return q.AppendAudit(ctx, s.adminEvent(EventSigningKeyRevoked, now, m, a, "", data))
	})
	if errors.Is(err, keys.ErrNotFound) {
		return KeyInfo{}, errNoSuchKey()
	}
	if err != nil {
		return KeyInfo{}, asAppErr(err)
	}
	return k, nil
}

// MaintainKeys runs one round of the signing-key schedule (see
// keys.Manager.Maintain): every replica calls it, and of all of them one
// creates each interval's key, recorded as signing_key.rotated with
// {"via": "schedule"} and no actor.
func (s *Service) MaintainKeys(ctx context.Context) (bool, error) {
	now := s.clock()
	return s.keys.Maintain(ctx, func(q store.Queries, kid string, retired []string) error {
		data := rotatedData(kid, retired, 0)
		delete(data, "activate_in_seconds")
		data["via"] = "schedule"
		return q.AppendAudit(ctx, s.event(EventSigningKeyRotated, now, Meta{}, "", "", data))
	})
}

func rotatedData(kid string, retired []string, activateIn time.Duration) map[string]any {
	if retired == nil {
		retired = []string{}
	}
	return map[string]any{"kid": kid, "retired": retired, "activate_in_seconds": int64(activateIn / time.Second)}
}

// EventSecretsResealed records a re-sealing of every sealed secret under
// the newest key-encryption key; audit-only, never delivered.
const EventSecretsResealed = "secrets.resealed"

// ResealReport counts what ResealSecrets did.
type ResealReport struct {
	Resealed int // re-sealed under the newest key
	Current  int // sealed under the newest key already
	Changed  int // changed meanwhile by someone else (a mail sent, a secret rotated): left as written
	Failed   int // opened by no key held: sealed under a key no longer in the file, or damaged
}

// sealContext is what a sealed value of kind is bound to.
func sealContext(kind, id string) string {
	switch kind {
	case store.SealedMailToken:
		return MailSealContext(id)
	case store.SealedWebhookSecret, store.SealedWebhookPrevious:
		return WebhookSealContext(id)
	}
	return id // a signing key's private half is bound to its kid
}

// ResealSecrets re-seals every sealed secret (signing keys, queued mails'
// link tokens, webhook endpoints' secrets) under the newest
// key-encryption key, so the older keys can be removed from the key file.
// Each value is replaced only if it is unchanged since it was read, so a
// concurrent writer wins and nothing is lost; values no key opens are
// counted, not touched. It records secrets.resealed with the counts.
// Replicas still running with the old file seal new values under the old
// key: restart every replica with the new file first.
func (s *Service) ResealSecrets(ctx context.Context, a Actor, m Meta) (ResealReport, error) {
	var r ResealReport
	if err := s.authorizeRead(ctx, a); err != nil {
		return r, err
	}
	vs, err := s.st.SealedValues(ctx)
	if err != nil {
		return r, apperr.Internal(err)
	}
	for _, v := range vs {
		sealed, changed, err := s.sealer.Reseal(v.Sealed, sealContext(v.Kind, v.ID))
		switch {
		case err != nil:
			r.Failed++
			s.log.Warn("a sealed secret opens with no key-encryption key held", "kind", v.Kind, "id", v.ID)
			continue
		case !changed:
			r.Current++
			continue
		}
		old := v.Sealed
		v.Sealed = sealed
		err = s.st.ReplaceSealedValue(ctx, v, old)
		switch {
		case errors.Is(err, store.ErrPrecondition):
			r.Changed++
		case err != nil:
			return r, apperr.Internal(err)
		default:
			r.Resealed++
		}
	}
	now := s.clock()
	data := map[string]any{"resealed": r.Resealed, "current": r.Current, "changed": r.Changed, "failed": r.Failed}
	if err := s.st.AppendAudit(ctx, s.adminEvent(EventSecretsResealed, now, m, a, "", data)); err != nil {
		return r, apperr.Internal(err)
	}
	return r, nil
}
