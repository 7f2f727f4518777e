package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/memlimit"
	"github.com/palisade-auth/palisade/internal/verifierapp"
)

func newServeCmd() *cobra.Command {
	var cfg config.Verifier
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy or forward-auth endpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.ValidateServe(); err != nil {
				return err
			}
			level, _ := config.ParseLogLevel(cfg.LogLevel)
			// The access log stays on without a write per request; Close
			// writes out what is queued once serving has stopped.
			out := httpserver.NewLogWriter(os.Stdout, httpserver.LogFlushInterval)
			defer out.Close()
			log := httpserver.NewLogger(out, level)
			memlimit.Apply(log, os.Getenv, ownMemoryLimit)
			setGCPercent(os.Getenv)
			return verifierapp.Serve(cmd.Context(), cfg, log)
		},
	}
	cfg.ServeFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
