// Package urlpath owns what a request path must look like to be matched
// against a configured path: the verifier's public and issuer paths, and
// the configuration that lists them.
package urlpath

import "strings"

// Canonical reports whether path starts with "/" and has no empty, "." or
// ".." segment and no percent-escape, backslash or path parameter (";"):
// the one form every server and framework reads alike. Anything else an
// app may normalize otherwise than the verifier, so it never matches a
// public path.
func Canonical(path string) bool {
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "%\\;") {
		return false
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(path, "//")
}
