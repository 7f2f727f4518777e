package config

import (
	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/store"
)

// DefaultDatabaseURL is the embedded default: a SQLite file.
const DefaultDatabaseURL = "sqlite:./data/issuer.db"

// Database is where the issuer keeps its state: the database and the
// key-encryption key that seals the secrets in it. Every issuer command
// that opens the database uses it.
type Database struct {
	DatabaseURL string
	KEKFile     string
	// NoMigrate (serve only) leaves pending migrations unapplied.
	NoMigrate bool
}

// Flags registers --database-url and --kek-file.
func (d *Database) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&d.DatabaseURL, "database-url", DefaultDatabaseURL, "database: postgres://... or sqlite:PATH")
	fs.StringVar(&d.KEKFile, "kek-file", "./data/kek", "file holding the key-encryption key that seals the signing keys (base64 of 32 bytes); generated with a warning when missing and the database is the embedded SQLite default")
}

// NoMigrateFlag registers --no-migrate, which only `issuer serve` has: the
// other commands migrate when they must.
func (d *Database) NoMigrateFlag(fs *pflag.FlagSet) {
	fs.BoolVar(&d.NoMigrate, "no-migrate", false, "do not apply pending migrations at start")
}

// Validate checks the part.
func (d *Database) Validate() error {
	var p problems
	if store.DialectOf(d.DatabaseURL) == "" {
		p.addf("--database-url must start with %s", store.URLSchemes)
	}
	if d.KEKFile == "" {
		p.addf("--kek-file is required")
	}
	return p.err()
}

// Embedded reports whether the database is the SQLite embedded default,
// where missing secrets may be generated for a laptop.
func (d *Database) Embedded() bool { return store.DialectOf(d.DatabaseURL) == store.SQLite }
