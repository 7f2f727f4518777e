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
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "issuer:", err)
		stop()
		os.Exit(1)
	}
}
