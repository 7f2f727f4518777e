package sqlstore

import "context"

// LockWaiters reports how many of this database's operations are waiting
// for a lock that another transaction holds: on PostgreSQL the sessions of
// this database blocked on a lock, on SQLite this store's transactions
// waiting for the write lock. Tests use it to know that a racing operation
// has reached the database and is waiting, instead of sleeping and hoping
// it has.
func (s *Store) LockWaiters(ctx context.Context) (int, error) {
	if s.dialect != Postgres {
		return int(s.beginning.Load()), nil
	}
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	return n, mapErr(err)
}
