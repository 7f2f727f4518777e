package sqlstore

import (
	"context"
	"errors"

	"github.com/palisade-auth/palisade/internal/store"
)

// The GCRA step is one statement: the upsert locks the key's row (or
// creates it), so concurrent checks of one key from every instance are
// serialized by the database and none is lost. The step runs at the later
// of now and the key's seen, so that a take which waited behind a later
// one (or whose replica's clock lags) does not go back in time. Every SET
// expression reads the row as it was, which is how denied can report the
// decision that tat's CASE took. The dialects differ only in placeholders
// and GREATEST/max.
const (
	takeRateLimitPostgres = `INSERT INTO rate_limits AS r (key, tat, denied, seen) VALUES ($1, $2::bigint + $3::bigint, FALSE, $2::bigint)
ON CONFLICT (key) DO UPDATE SET
  tat = CASE WHEN GREATEST(r.tat, r.seen, $2::bigint) + $3::bigint - GREATEST(r.seen, $2::bigint) <= $4::bigint
             THEN GREATEST(r.tat, r.seen, $2::bigint) + $3::bigint ELSE r.tat END,
  denied = GREATEST(r.tat, r.seen, $2::bigint) + $3::bigint - GREATEST(r.seen, $2::bigint) > $4::bigint,
  seen = GREATEST(r.seen, $2::bigint)
RETURNING tat, seen, denied`
	takeRateLimitSQLite = `INSERT INTO rate_limits AS r (key, tat, denied, seen) VALUES (?1, ?2 + ?3, 0, ?2)
ON CONFLICT (key) DO UPDATE SET
  tat = CASE WHEN max(r.tat, r.seen, ?2) + ?3 - max(r.seen, ?2) <= ?4 THEN max(r.tat, r.seen, ?2) + ?3 ELSE r.tat END,
  denied = max(r.tat, r.seen, ?2) + ?3 - max(r.seen, ?2) > ?4,
  seen = max(r.seen, ?2)
RETURNING tat, seen, denied`
)

// TakeRateLimit implements ratelimit.Store: one GCRA step for key.
func (s *Store) TakeRateLimit(ctx context.Context, key string, now, interval, period int64) (int64, int64, bool, error) {
	query := takeRateLimitSQLite
	if s.dialect == Postgres {
		query = takeRateLimitPostgres
	}
	var row struct {
		TAT    int64 `db:"tat"`
		Seen   int64 `db:"seen"`
		Denied bool  `db:"denied"`
	}
	if err := s.get(ctx, &row, query, key, now, interval, period); err != nil {
		return 0, 0, false, err
	}
	return row.TAT, row.Seen, !row.Denied, nil
}

// SweepRateLimits implements ratelimit.Store: it deletes the keys whose TAT
// has passed.
func (s *Store) SweepRateLimits(ctx context.Context, now int64) (int64, error) {
	return s.exec(ctx, `DELETE FROM rate_limits WHERE tat < ?`, now)
}

// ResetRateLimit implements ratelimit.Store: it deletes key.
func (s *Store) ResetRateLimit(ctx context.Context, key string) error {
	_, err := s.exec(ctx, `DELETE FROM rate_limits WHERE key = ?`, key)
	return err
}

// PeekRateLimit implements ratelimit.Store: key's TAT, 0 when it has none.
func (s *Store) PeekRateLimit(ctx context.Context, key string) (int64, error) {
	var tat int64
	err := s.get(ctx, &tat, `SELECT tat FROM rate_limits WHERE key = ?`, key)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return tat, err
}
