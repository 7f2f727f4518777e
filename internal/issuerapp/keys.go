package issuerapp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/store"
)

// Rotate creates a new signing key and records signing_key.rotated in the
// same transaction.
func (a *App) Rotate(ctx context.Context, activateIn time.Duration) (keys.Info, error) {
	return a.Keys.Rotate(ctx, activateIn, func(q store.Queries, kid string, retired []string) error {
		data, err := json.Marshal(map[string]any{"kid": kid, "retired": retired, "activate_in_seconds": int64(activateIn.Seconds())})
		if err != nil {
			return err
		}
		return q.AppendAudit(ctx, store.AuditEvent{
			ID: uuid.Must(uuid.NewV7()).String(), Type: auth.EventSigningKeyRotated,
			OccurredAt: a.now().UTC().Truncate(time.Microsecond), UserAgent: "issuer-cli", Data: data,
		})
	})
}
