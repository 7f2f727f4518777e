package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "verifier",
		Short:         "Palisade verifier: checks access tokens in front of apps",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newCheckCmd(), newVersionCmd())
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
