package sqlstore_test

import (
	"testing"

	"github.com/palisade-auth/palisade/internal/store/sqlstore"
)

// TestParseURLConnectTimeout: a PostgreSQL URL gets a connect timeout
// unless the operator chose one, in the URL or in PGCONNECT_TIMEOUT.
func TestParseURLConnectTimeout(t *testing.T) {
	def := "connect_timeout=" + sqlstore.DefaultConnectTimeout
	for _, tc := range []struct {
		name, url, env string // env: PGCONNECT_TIMEOUT, "" for unset
		want           string // the DSN lib/pq gets
	}{
		{"no parameters", "postgres://u@db:5432/x", "",
			"postgres://u@db:5432/x?binary_parameters=yes&" + def},
		{"other parameters", "postgresql://u@db/x?sslmode=disable", "",
			"postgresql://u@db/x?sslmode=disable&binary_parameters=yes&" + def},
		{"chosen in the URL", "postgres://u@db/x?connect_timeout=30&sslmode=disable", "",
			"postgres://u@db/x?connect_timeout=30&sslmode=disable&binary_parameters=yes"},
		{"zero chosen in the URL", "postgres://u@db/x?connect_timeout=0", "",
			"postgres://u@db/x?connect_timeout=0&binary_parameters=yes"},
		{"chosen in the environment", "postgres://u@db/x", "20",
			"postgres://u@db/x?binary_parameters=yes"},
		{"other parameter ending in the name", "postgres://u@db/x?xconnect_timeout=1", "",
			"postgres://u@db/x?xconnect_timeout=1&binary_parameters=yes&" + def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("PGCONNECT_TIMEOUT", tc.env)
			}
			_, driver, dsn, err := sqlstore.ParseURL(tc.url)
			if err != nil || driver != "postgres" || dsn != tc.want {
				t.Errorf("parseURL(%q) = %q, %q, %v, want postgres, %q, nil", tc.url, driver, dsn, err, tc.want)
			}
		})
	}
}
