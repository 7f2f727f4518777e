// Command pgprobe tells, before the tests run, whether the PostgreSQL suite
// and the Redis tests will run: a loud banner when one will be skipped, a
// failure when CI=true needs it and it is unreachable.
package main

import (
	"fmt"
	"os"

	"github.com/palisade-auth/palisade/internal/testdb"
)

func main() {
	ok := report("PostgreSQL suite", "PostgreSQL SUITE", testdb.Describe(), testdb.Probe(),
		"Only SQLite is tested. Set "+testdb.EnvPostgres+" to a server URL to run it.")
	ok = report("Redis rate-limit suite", "Redis RATE-LIMIT SUITE", testdb.DescribeRedis(), testdb.ProbeRedis(),
		"The Redis rate-limit store is not tested. Set "+testdb.EnvRedis+" or start redis-server.") && ok
	if !ok {
		os.Exit(1)
	}
}

// report prints whether one server's tests run, and returns false when
// CI=true needs the server and it is unreachable.
func report(suite, banner, where string, err error, hint string) bool {
	switch {
	case err == nil:
		fmt.Printf("%s is reachable: the %s runs.\n", where, suite)
	case testdb.CIRequired():
		fmt.Fprintf(os.Stderr, "%s is unreachable and CI=true requires it: %v\n", where, err)
		return false
	default:
		bar := "**********************************************************************"
		fmt.Fprintf(os.Stderr, "%s\n* %s SKIPPED: %s is unreachable.\n* (%v)\n* %s\n%s\n",
			bar, banner, where, err, hint, bar)
	}
	return true
}
