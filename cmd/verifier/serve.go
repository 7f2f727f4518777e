package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/memlimit"
	"github.com/palisade-auth/palisade/internal/signals"
	"github.com/palisade-auth/palisade/internal/verifierapp"
)

func newServeCmd(sig *signals.Process) *cobra.Command {
	var cfg config.Verifier
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy or forward-auth endpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := cfg.ValidateServe(); err != nil {
				return err
			}
			level, _ := config.ParseLogLevel(cfg.LogLevel)
			// The access log stays on without a write per request and
			// without waiting for stdout: what is queued is written out
			// once serving has stopped, or before a second signal's kill.
			sig.Serve()
			out := httpserver.NewLogWriter(os.Stdout, httpserver.LogFlushInterval)
			defer func() { err = errors.Join(err, out.CloseWithin(httpserver.LogDrainTimeout)) }()
			sig.BeforeKill(out.Flush)
			log := httpserver.NewLogger(out, level)
			memlimit.Apply(log, os.Getenv, ownMemoryLimit)
			setGCPercent(os.Getenv)
			return verifierapp.Serve(cmd.Context(), cfg, log, out.Collector("verifier"))
		},
	}
	cfg.ServeFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
