// Command verifier is the token-checking sidecar: a reverse proxy (or a
// forward-auth endpoint) that lets only requests with a valid access token
// through, with the caller's identity in X-Auth-* headers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts the graceful shutdown; the next one, its
	// default action restored, ends the process at once (a second Ctrl-C
	// when the grace is not worth waiting for).
	context.AfterFunc(ctx, stop)
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "verifier:", err)
		stop()
		os.Exit(1)
	}
}
