//go:build !unix

package sqlstore

// lockFile is a no-op where flock is unavailable: there, processes that
// share one SQLite file must not migrate it at the same moment.
func lockFile(string) (func(), error) { return func() {}, nil }
