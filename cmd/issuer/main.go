// Command issuer is the authentication service: it registers users, checks
// passwords, issues and rotates tokens and publishes its public keys.
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
		sig.Fail("issuer", err)
	}
}
