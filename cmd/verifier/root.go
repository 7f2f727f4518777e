package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/signals"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// newRootCmd returns the command tree; sig is the process's signal
// handling, which the serve command flushes its log through.
func newRootCmd(sig *signals.Process) *cobra.Command {
	root := &cobra.Command{
		Use:           "verifier",
		Short:         "Palisade verifier: checks access tokens in front of apps",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(sig), newCheckCmd(), newVersionCmd())
	return root
}

// bindEnv makes every flag of cmd readable from VERIFIER_* and documents it.
func bindEnv(cmd *cobra.Command) {
	config.AnnotateEnv(cmd.Flags(), "VERIFIER")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		return config.ApplyEnv(cmd.Flags(), "VERIFIER", os.LookupEnv)
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println("verifier", version)
			return nil
		},
	}
}
