package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
)

func newUsersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "users", Short: "Manage accounts"}
	cmd.AddCommand(newUsersCreateCmd())
	return cmd
}

func newUsersCreateCmd() *cobra.Command {
	var (
		cfg           config.Issuer
		email, role   string
		passwordStdin bool
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an account (the password is read from stdin, never from a flag)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !passwordStdin {
				return errors.New("--password-stdin is required: passwords are never taken from flags or the environment")
			}
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && line == "" {
				return fmt.Errorf("read password from stdin: %w", err)
			}
			pw := strings.TrimRight(line, "\r\n")
			app, err := openApp(cmd.Context(), cfg, true)
			if err != nil {
				return err
			}
			defer app.Close()
			svc := app.Auth(0, "", "", 0, 0)
			u, err := svc.Register(cmd.Context(), auth.RegisterInput{Email: email, Password: pw, Role: role}, auth.Meta{UserAgent: "issuer-cli"})
			if err != nil {
				return describe(err)
			}
			cmd.Printf("created user %s (%s, role %s)\n", u.ID, u.Email, u.Role)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "email of the account")
	f.StringVar(&role, "role", auth.RoleUser, "role of the account (e.g. user, admin)")
	f.BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of stdin")
	_ = cmd.MarkFlagRequired("email")
	cfg.StoreFlags(f)
	bindEnv(cmd)
	return cmd
}

// describe turns a domain error into a message for the terminal.
func describe(err error) error {
	e := apperr.As(err)
	if e.Kind == apperr.KindInternal {
		return err
	}
	msg := e.Message
	for _, f := range e.Fields {
		msg += fmt.Sprintf("\n  %s: %s", f.Field, f.Message)
	}
	return errors.New(msg)
}
