package store

import "strings"

// Dialects of the databases a backend opens.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// urlSchemes is the one list of database URL forms: the configuration
// validates against it and the SQL backend picks its driver from it.
var urlSchemes = []struct{ prefix, dialect string }{
	{"postgres://", Postgres},
	{"postgresql://", Postgres},
	{"sqlite:", SQLite},
}

// URLSchemes names the accepted URL forms, for messages.
const URLSchemes = "postgres://, postgresql:// or sqlite:"

// DialectOf returns the dialect a database URL selects, or "" when it has
// none of the accepted forms.
func DialectOf(url string) string {
	for _, s := range urlSchemes {
		if strings.HasPrefix(url, s.prefix) {
			return s.dialect
		}
	}
	return ""
}
