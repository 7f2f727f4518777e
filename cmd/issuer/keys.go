package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
)

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Inspect and rotate the signing keys"}
	cmd.AddCommand(newKeysListCmd(), newKeysRotateCmd())
	return cmd
}

func newKeysListCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the published signing keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := openApp(cmd.Context(), cfg, true)
			if err != nil {
				return err
			}
			defer app.Close()
			infos, err := app.Keys.List(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KID\tALG\tSTATE\tACTIVATES\tRETIRES\tUNPUBLISHED")
			for _, k := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.KID, k.Algorithm, k.State, ts(&k.ActivatesAt), ts(k.RetiresAt), ts(k.ExpiresAt))
			}
			return tw.Flush()
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newKeysRotateCmd() *cobra.Command {
	var (
		cfg        config.Issuer
		activateIn time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Create a new signing key; the current one stops signing when it activates and stays published until its tokens have expired",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := openApp(cmd.Context(), cfg, true)
			if err != nil {
				return err
			}
			defer app.Close()
			info, err := app.Rotate(cmd.Context(), activateIn)
			if err != nil {
				return err
			}
			cmd.Printf("new key %s activates at %s\n", info.KID, ts(&info.ActivatesAt))
			return nil
		},
	}
	cmd.Flags().DurationVar(&activateIn, "activate-in", 10*time.Minute, "publish the new key this long before it starts signing, so verifiers' caches learn it first (at least the JWK set max-age)")
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func ts(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
