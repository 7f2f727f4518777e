package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/verifierapp"
)

func newCheckCmd() *cobra.Command {
	var cfg config.Verifier
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify a token read from stdin and print its claims or why it fails",
		Long: "Reads one access token from standard input, verifies it exactly as `serve` would, and prints\n" +
			"the verified identity as JSON, or the reason it is refused (exit status 1).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.ValidateKeys(); err != nil {
				return err
			}
			raw, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
			if err != nil {
				return err
			}
			level, _ := config.ParseLogLevel(cfg.LogLevel)
			id, err := verifierapp.Check(cmd.Context(), cfg, httpserver.NewLogger(os.Stderr, level), strings.TrimSpace(string(raw)))
			if err != nil {
				return fmt.Errorf("token refused: %w", err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(id)
		},
	}
	cfg.KeyFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}
