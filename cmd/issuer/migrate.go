package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "migrate", Short: "Apply or inspect database migrations"}
	cmd.AddCommand(newMigrateUpCmd(), newMigrateStatusCmd())
	return cmd
}

func newMigrateUpCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply pending migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := openApp(cmd.Context(), cfg, true)
			if err != nil {
				return err
			}
			defer app.Close()
			cmd.Println("migrations applied")
			return nil
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newMigrateStatusCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether they are applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := openApp(cmd.Context(), cfg, false)
			if err != nil {
				return err
			}
			defer app.Close()
			states, err := app.Store.MigrationStatus(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED")
			for _, s := range states {
				applied := "pending"
				if s.Applied {
					applied = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\n", s.Version, s.Name, applied)
			}
			return tw.Flush()
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
