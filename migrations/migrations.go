// Package migrations owns the database schema: plain SQL files per dialect,
// embedded into the binary so that `issuer serve` and `issuer migrate` never
// depend on files next to the executable.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// For returns the migrations of dialect ("postgres" or "sqlite") as a flat
// file system of goose-annotated SQL files.
func For(dialect string) (fs.FS, error) {
	switch dialect {
	case "postgres", "sqlite":
		return fs.Sub(files, dialect)
	}
	return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
}
