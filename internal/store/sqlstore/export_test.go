package sqlstore

import (
	"context"

	"github.com/palisade-auth/palisade/internal/store"
)

// MapErr exposes the driver-error translation to the external tests.
var MapErr = mapErr

// ExplainRotation is PostgreSQL's plan for the rotation statement bound to
// r (EXPLAIN: nothing runs), a line per element.
func (s *Store) ExplainRotation(ctx context.Context, r store.RotateRequest) ([]string, error) {
	query, args, err := claimPostgresQuery(r)
	if err != nil {
		return nil, err
	}
	var plan []string
	err = s.db.SelectContext(ctx, &plan, "EXPLAIN "+s.q(query), args...)
	return plan, err
}
