package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/issuerapi"
)

// The keys commands act as auth.Operator(): their audit entries carry
// {"via": "cli"}.

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Inspect, rotate and revoke the signing keys; re-seal secrets under a new key-encryption key"}
	cmd.AddCommand(newKeysListCmd(), newKeysRotateCmd(), newKeysRevokeCmd(), newKeysResealCmd())
	return cmd
}

const keysHeader = "KID\tSTATE\tCREATED\tACTIVATES\tRETIRES\tREVOKED"

func keyRow(t *table, k auth.KeyInfo) error {
	return t.row(issuerapi.KeyObject(k), k.KID, k.State, ts(&k.CreatedAt), ts(&k.ActivatesAt), ts(k.RetiresAt), ts(k.RevokedAt))
}

func newKeysListCmd() *cobra.Command {
	var (
		cfg    config.Issuer
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the signing keys and their states: next, active, retired, revoked (a table, or one JSON key object per line with --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				ks, err := svc.AdminKeys(cmd.Context(), auth.Operator())
				if err != nil {
					return describe(err)
				}
				t := newTable(cmd.OutOrStdout(), asJSON, keysHeader)
				for _, k := range ks {
					if err := keyRow(t, k); err != nil {
						return err
					}
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON key object per line")
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newKeysRotateCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Create a new signing key, published at once; it signs after --activate-in, when the current one retires (published until its tokens have expired)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSealingService(cmd.Context(), cfg, func(svc *auth.Service) error {
				in := cfg.ActivateIn
				k, err := svc.AdminRotateKey(cmd.Context(), auth.Operator(), &in, cliMeta)
				if err != nil {
					return describe(err)
				}
				cmd.Printf("new key %s activates at %s\n", k.KID, ts(&k.ActivatesAt))
				return nil
			})
		},
	}
	cfg.KeySchedule.ActivateInFlag(cmd.Flags())
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newKeysRevokeCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "revoke [--] KID",
		Short: "Revoke a signing key: it leaves the JWK set at once; when it was signing, the published next key (or a fresh one) signs from now on",
		Long: "Revoke a signing key: it leaves the JWK set at once; when it was signing, the published next key (or a fresh one) signs from now on.\n\n" +
			"A KID is base64url and may begin with \"-\" (one in 64 does): put -- before it, as in issuer keys revoke -- \"$KID\".",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				k, err := svc.AdminRevokeKey(cmd.Context(), auth.Operator(), args[0], cliMeta)
				if err != nil {
					return describe(err)
				}
				cmd.Printf("revoked key %s at %s\n", k.KID, ts(k.RevokedAt))
				return nil
			})
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w (a KID that begins with \"-\" goes after --: issuer keys revoke -- KID)", err)
	})
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newKeysResealCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "reseal",
		Short: "Re-seal every sealed secret (signing keys, queued mail tokens, webhook secrets) under the newest key-encryption key (the first line of --kek-file), after which the older lines can be removed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				r, err := svc.ResealSecrets(cmd.Context(), auth.Operator(), cliMeta)
				if err != nil {
					return describe(err)
				}
				cmd.Printf("resealed %d, already under the newest key %d, changed meanwhile %d, unreadable %d\n", r.Resealed, r.Current, r.Changed, r.Failed)
				if r.Failed > 0 {
					return fmt.Errorf("%d sealed secrets open with no key in --kek-file: keep the key that sealed them", r.Failed)
				}
				return nil
			})
		},
	}
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
