package sqlstore

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/palisade-auth/palisade/migrations"
)

// MigrationState is one migration and whether it is applied.
type MigrationState struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
}

func (s *Store) provider() (*goose.Provider, error) {
	fsys, err := migrations.For(s.dialect)
	if err != nil {
		return nil, err
	}
	dialect := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if s.dialect == Postgres {
		dialect = goose.DialectPostgres
		// Replicas starting together must not apply a migration twice:
		// an advisory lock makes them take turns.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	return goose.NewProvider(dialect, s.db.DB, fsys, opts...)
}

// Migrate applies every pending migration.
func (s *Store) Migrate(ctx context.Context) error {
	p, err := s.provider()
	if err != nil {
		return fmt.Errorf("sqlstore: migrations: %w", err)
	}
	if s.dialect == SQLite {
		// goose has no locker for SQLite; a file lock beside the database
		// makes processes sharing the file take turns, as the advisory
		// lock does on PostgreSQL.
		unlock, err := lockFile(s.path + ".migrate-lock")
		if err != nil {
			return err
		}
		defer unlock()
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlstore: apply migrations: %w", err)
	}
	return nil
}

// MigrationStatus lists every known migration, oldest first.
func (s *Store) MigrationStatus(ctx context.Context) ([]MigrationState, error) {
	p, err := s.provider()
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migration status: %w", err)
	}
	out := make([]MigrationState, 0, len(st))
	for _, m := range st {
		out = append(out, MigrationState{
			Version:   m.Source.Version,
			Name:      strings.TrimSuffix(path.Base(m.Source.Path), ".sql"),
			Applied:   m.State == goose.StateApplied,
			AppliedAt: m.AppliedAt,
		})
	}
	return out, nil
}
