package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/issuerapp"
	"github.com/palisade-auth/palisade/internal/signals"
)

func newServeCmd(sig *signals.Process) *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API (and metrics on the admin listener)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := issuerapp.ValidateServe(&cfg); err != nil {
				return err
			}
			// The access log stays on without a write per request and
			// without waiting for stdout: what is queued is written out
			// once serving has stopped, or before a second signal's kill.
			sig.Serve()
			out := httpserver.NewLogWriter(os.Stdout, httpserver.LogFlushInterval)
			defer func() { err = errors.Join(err, out.CloseWithin(httpserver.LogDrainTimeout)) }()
			sig.BeforeKill(out.Flush)
			log := httpserver.NewLogger(out, cfg.Level())
			app, err := issuerapp.Open(cmd.Context(), cfg, log, !cfg.NoMigrate)
			if err != nil {
				return err
			}
			defer app.Close()
			return app.Serve(cmd.Context(), out.Collector("issuer"))
		},
	}
	cfg.ServeFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
