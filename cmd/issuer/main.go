// Command issuer is the authentication service: it registers users, checks
// passwords, issues and rotates tokens and publishes its public keys.
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
		fmt.Fprintln(os.Stderr, "issuer:", err)
		stop()
		os.Exit(1)
	}
}
