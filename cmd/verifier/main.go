// Command verifier is the token-checking sidecar: a reverse proxy (or a
// forward-auth endpoint) that lets only requests with a valid access token
// through, with the caller's identity in X-Auth-* headers.
package main

import (
	"github.com/palisade-auth/palisade/internal/signals"
)

func main() {
	// The first SIGINT or SIGTERM starts the graceful shutdown; the next
	// ends the process at once (a second Ctrl-C when the grace is not worth
	// waiting for), after the queued log lines are written out.
	sig := signals.Notify()
	defer sig.Stop()
	if err := newRootCmd(sig).ExecuteContext(sig.Context()); err != nil {
		sig.Fail("verifier", err)
	}
}
