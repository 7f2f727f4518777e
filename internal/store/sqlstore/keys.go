package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

const keyColumns = `kid, alg, public_jwk, private_key, created_at, activates_at, retires_at, expires_at, revoked_at`

// signingKeysLock is the advisory-lock id that serializes key creation
// among issuer replicas on PostgreSQL ("palisade" in ASCII, truncated).
const signingKeysLock = 0x70616c6973616465

func (q *queries) CreateSigningKey(ctx context.Context, k store.SigningKey) error {
	_, err := q.exec(ctx, `INSERT INTO signing_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.KID, k.Algorithm, string(k.PublicJWK), k.PrivateSeal, ts(k.CreatedAt), ts(k.ActivatesAt), tsp(k.RetiresAt), tsp(k.ExpiresAt), tsp(k.RevokedAt))
	return err
}

func (q *queries) SigningKeys(ctx context.Context, now time.Time) ([]store.SigningKey, error) {
	var out []store.SigningKey
	err := q.selectAll(ctx, &out, `SELECT `+keyColumns+` FROM signing_keys
		WHERE expires_at IS NULL OR expires_at > ? ORDER BY activates_at, kid`, ts(now))
	return out, err
}

func (q *queries) RetireSigningKeys(ctx context.Context, at, expires time.Time, exceptKID string) (kids []string, err error) {
	err = q.atomic(ctx, func(q *queries) error {
		kids = nil
		if err := q.selectAll(ctx, &kids, `SELECT kid FROM signing_keys
			WHERE retires_at IS NULL AND revoked_at IS NULL AND activates_at <= ? AND kid <> ? ORDER BY kid`+q.forUpdate(), ts(at), exceptKID); err != nil {
			return err
		}
		_, err := q.exec(ctx, `UPDATE signing_keys SET retires_at = ?, expires_at = ?
			WHERE retires_at IS NULL AND revoked_at IS NULL AND activates_at <= ? AND kid <> ?`, ts(at), ts(expires), ts(at), exceptKID)
		return err
	})
	return kids, err
}

func (q *queries) LockSigningKeys(ctx context.Context) error {
	if q.dialect != Postgres {
		// The SQLite transaction already holds the database write lock.
		return nil
	}
	_, err := q.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(signingKeysLock))
	return err
}

func (q *queries) RevokeSigningKey(ctx context.Context, kid string, at, expires time.Time) (bool, error) {
	n, err := q.exec(ctx, `UPDATE signing_keys SET revoked_at = ?, expires_at = ?
		WHERE kid = ? AND revoked_at IS NULL`, ts(at), ts(expires), kid)
	if err != nil || n == 1 {
		return n == 1, err
	}
	var found int
	if err := q.get(ctx, &found, `SELECT COUNT(*) FROM signing_keys WHERE kid = ?`, kid); err != nil {
		return false, err
	}
	if found == 0 {
		return false, store.ErrNotFound
	}
	return false, nil
}

func (q *queries) RescheduleSigningKey(ctx context.Context, kid string, activates time.Time, retires, expires *time.Time) error {
	n, err := q.exec(ctx, `UPDATE signing_keys SET activates_at = ?, retires_at = ?, expires_at = ?
		WHERE kid = ? AND revoked_at IS NULL`, ts(activates), tsp(retires), tsp(expires), kid)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (q *queries) SealedValues(ctx context.Context) ([]store.SealedValue, error) {
	var out []store.SealedValue
	err := q.selectAll(ctx, &out, `SELECT 'signing_key' AS kind, kid AS id, private_key AS sealed FROM signing_keys
		UNION ALL SELECT 'mail_token', id, sealed_token FROM mail_outbox WHERE sealed_token IS NOT NULL
		UNION ALL SELECT 'webhook_secret', id, secret FROM webhook_endpoints
		UNION ALL SELECT 'webhook_previous_secret', id, previous_secret FROM webhook_endpoints WHERE previous_secret IS NOT NULL
		ORDER BY 1, 2`)
	return out, err
}

// sealedColumns maps a sealed value's kind to its table, key and column.
var sealedColumns = map[string][3]string{
	store.SealedSigningKey:      {"signing_keys", "kid", "private_key"},
	store.SealedMailToken:       {"mail_outbox", "id", "sealed_token"},
	store.SealedWebhookSecret:   {"webhook_endpoints", "id", "secret"},
	store.SealedWebhookPrevious: {"webhook_endpoints", "id", "previous_secret"},
}

func (q *queries) ReplaceSealedValue(ctx context.Context, v store.SealedValue, old []byte) error {
	c, ok := sealedColumns[v.Kind]
	if !ok {
		return fmt.Errorf("sqlstore: unknown sealed value kind %q", v.Kind)
	}
	n, err := q.exec(ctx, `UPDATE `+c[0]+` SET `+c[2]+` = ? WHERE `+c[1]+` = ? AND `+c[2]+` = ?`, v.Sealed, v.ID, old)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrPrecondition
	}
	return nil
}
