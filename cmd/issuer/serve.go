package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/issuerapp"
)

func newServeCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API (and metrics on the admin listener)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := issuerapp.ValidateServe(&cfg); err != nil {
				return err
			}
			// The access log stays on without a write per request; Close
			// writes out what is queued once serving has stopped.
			out := httpserver.NewLogWriter(os.Stdout, httpserver.LogFlushInterval)
			defer out.Close()
			log := httpserver.NewLogger(out, cfg.Level())
			app, err := issuerapp.Open(cmd.Context(), cfg, log, !cfg.NoMigrate)
			if err != nil {
				return err
			}
			defer app.Close()
			return app.Serve(cmd.Context())
		},
	}
	cfg.ServeFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
