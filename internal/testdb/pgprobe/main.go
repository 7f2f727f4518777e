// Command pgprobe tells, before the tests run, whether the PostgreSQL suite
// will run: a loud banner when it will be skipped, a failure when CI=true
// needs it and it is unreachable.
package main

import (
	"fmt"
	"os"

	"github.com/palisade-auth/palisade/internal/testdb"
)

func main() {
	err := testdb.Probe()
	switch {
	case err == nil:
		fmt.Printf("%s is reachable: the PostgreSQL suite runs.\n", testdb.Describe())
	case testdb.CIRequired():
		fmt.Fprintf(os.Stderr, "%s is unreachable and CI=true requires it: %v\n", testdb.Describe(), err)
		os.Exit(1)
	default:
		bar := "**********************************************************************"
		fmt.Fprintf(os.Stderr, "%s\n* PostgreSQL SUITE SKIPPED: %s is unreachable.\n* (%v)\n* Only SQLite is tested. Set %s to a server URL to run it.\n%s\n",
			bar, testdb.Describe(), err, testdb.EnvPostgres, bar)
	}
}
