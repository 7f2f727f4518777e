package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/issuerapp"
	"github.com/palisade-auth/palisade/internal/signals"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// newRootCmd returns the command tree; sig is the process's signal
// handling, which the serve command flushes its log through.
func newRootCmd(sig *signals.Process) *cobra.Command {
	root := &cobra.Command{
		Use:           "issuer",
		Short:         "Palisade issuer: accounts, passwords, tokens and signing keys",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(sig), newMigrateCmd(), newUsersCmd(), newAuditCmd(), newKeysCmd(), newWebhooksCmd(), newVersionCmd())
	return root
}

// bindEnv makes every flag of cmd readable from ISSUER_* and documents it,
// and checks the command's input once the environment is applied.
func bindEnv(cmd *cobra.Command) {
	config.AnnotateEnv(cmd.Flags(), "ISSUER")
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := config.ApplyEnv(cmd.Flags(), "ISSUER", os.LookupEnv); err != nil {
			return err
		}
		return checkInput(cmd, args)
	}
}

// openApp opens the database and keys for a subcommand.
func openApp(ctx context.Context, cfg config.Issuer, migrate bool) (*issuerapp.App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return issuerapp.Open(ctx, cfg, httpserver.NewLogger(os.Stderr, cfg.Level()), migrate)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println("issuer", version)
			return nil
		},
	}
}
