package issuerapp

import (
	"context"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
)

// runKeySchedule keeps the signing keys in shape until ctx ends: every
// --key-reload-interval it runs one round of the schedule (a key signs;
// with --key-rotation-interval a next key is published). Every replica
// runs it; they agree from the database alone, so between them they create
// one key per interval.
func (a *App) runKeySchedule(ctx context.Context, svc *auth.Service) {
	t := time.NewTicker(a.Cfg.KeyReloadInterval)
	defer t.Stop()
	for {
		if created, err := svc.MaintainKeys(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.Log.Warn("signing-key schedule failed; trying again", "error", err)
		} else if created {
			a.Log.Info("published the next signing key")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
