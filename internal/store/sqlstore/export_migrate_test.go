package sqlstore

import "context"

// MigrateUpTo applies the migrations up to and including version: tests of
// a migration write data as it stood before it.
func (s *Store) MigrateUpTo(ctx context.Context, version int64) error {
	p, err := s.provider()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// Exec runs one statement with ? placeholders, for data of a schema older
// than the store's records.
func (s *Store) Exec(ctx context.Context, query string, args ...any) error {
	_, err := s.exec(ctx, query, args...)
	return err
}
