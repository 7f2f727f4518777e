package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/issuerapi"
	"github.com/palisade-auth/palisade/internal/keys"
)

func newUsersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "users", Short: "Manage accounts"}
	cmd.AddCommand(newUsersCreateCmd(), newUsersListCmd(), newUsersDisableCmd(), newUsersEnableCmd(), newUsersSetRoleCmd())
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
			// The account's verification mail carries a sealed link.
			return withSealingService(cmd.Context(), cfg, func(svc *auth.Service) error {
				u, err := svc.Register(cmd.Context(), auth.RegisterInput{Email: email, Password: pw, Role: role}, auth.Meta{UserAgent: "issuer-cli"})
				if err != nil {
					return describe(err)
				}
				cmd.Printf("created user %s (%s, role %s)\n", u.ID, u.Email, u.Role)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "email of the account")
	f.StringVar(&role, "role", auth.RoleUser, "role of the account (e.g. user, admin)")
	f.BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of stdin")
	_ = cmd.MarkFlagRequired("email")
	cfg.StoreFlags(f)
	cfg.MailLinks.Flags(f)
	bindEnv(cmd)
	return cmd
}

// describe turns a domain error into a message for the terminal.
func describe(err error) error {
	if errors.Is(err, keys.ErrSealed) {
		return fmt.Errorf("--kek-file does not open the signing keys in the database: they were sealed under another key-encryption key (%w)", err)
	}
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

// The commands below act as auth.Operator(): whoever runs them holds the
// database URL and the key-encryption key, so no role is checked. Their
// audit entries carry no actor_id and {"via": "cli"} in their data.

// cliMeta is what the audit trail records of a command-line action.
var cliMeta = auth.Meta{UserAgent: "issuer-cli"}

// withService opens the issuer's database and runs fn with the flows.
func withService(ctx context.Context, cfg config.Issuer, fn func(svc *auth.Service) error) error {
	return withApp(ctx, cfg, false, fn)
}

// withSealingService is withService for a command that seals what it
// writes (a signing key, a webhook secret) under the key-encryption key: it
// refuses a --kek-file that does not open the key signing now (app.CheckKEK).
// The commands that read, or repair the keys (keys list, revoke, reseal),
// do not check: they must work when a key is what is wrong.
func withSealingService(ctx context.Context, cfg config.Issuer, fn func(svc *auth.Service) error) error {
	return withApp(ctx, cfg, true, fn)
}

func withApp(ctx context.Context, cfg config.Issuer, seals bool, fn func(svc *auth.Service) error) error {
	app, err := openApp(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer app.Close()
	if seals {
		if err := app.CheckKEK(ctx); err != nil {
			return err
		}
	}
	return fn(app.OperatorAuth())
}

func newUsersListCmd() *cobra.Command {
	var (
		cfg    config.Issuer
		email  string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List accounts, oldest first (a table, or one JSON user object per line with --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				out := newUserPrinter(cmd.OutOrStdout(), asJSON)
				err := eachPage(func(cursor string) ([]auth.Account, string, error) {
					page, err := svc.AdminUsers(cmd.Context(), auth.Operator(), auth.UserQuery{Email: email, Limit: auth.MaxPageSize, Cursor: cursor})
					return page.Users, page.Next, err
				}, out.print)
				if err != nil {
					// An error of printing is internal: describe returns it as is.
					return describe(err)
				}
				return out.flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "only accounts whose email contains this text (case-insensitive)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line, as the admin API answers")
	cfg.StoreFlags(f)
	bindEnv(cmd)
	return cmd
}

// userPrinter writes users as a table or as JSON lines.
type userPrinter struct {
	json *json.Encoder
	tw   *tabwriter.Writer
}

func newUserPrinter(w io.Writer, asJSON bool) *userPrinter {
	if asJSON {
		return &userPrinter{json: json.NewEncoder(w)}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEMAIL\tROLE\tSTATUS\tVERIFIED\tTENANT\tORGANIZATION\tCREATED")
	return &userPrinter{tw: tw}
}

func (p *userPrinter) print(u auth.Account) error {
	if p.json != nil {
		return p.json.Encode(issuerapi.UserObject(u))
	}
	_, err := fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", u.ID, u.Email, u.Role, u.Status,
		u.EmailVerifiedAt != nil, dash(u.TenantID), dash(u.OrganizationID), ts(&u.CreatedAt))
	return err
}

func (p *userPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newUsersChangeCmd builds a command that changes the account named by its
// first argument (an id, or an email when it holds an "@").
func newUsersChangeCmd(use, short string, nargs int, patch func(args []string) auth.UserPatch, done func(u auth.Account) string) *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				u, err := svc.AdminFindUser(cmd.Context(), auth.Operator(), args[0])
				if err != nil {
					return describe(err)
				}
				u, err = svc.AdminUpdateUser(cmd.Context(), auth.Operator(), u.ID, patch(args), cliMeta)
				if err != nil {
					return describe(err)
				}
				cmd.Printf("%s: user %s (%s)\n", done(u), u.ID, u.Email)
				return nil
			})
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func status(s string) func([]string) auth.UserPatch {
	return func([]string) auth.UserPatch { return auth.UserPatch{Status: &s} }
}

func newUsersDisableCmd() *cobra.Command {
	return newUsersChangeCmd("disable ID|EMAIL",
		"Disable an account: it can no longer log in or refresh, and every session of it is revoked now",
		1, status(auth.StatusDisabled), func(auth.Account) string { return "disabled" })
}

func newUsersEnableCmd() *cobra.Command {
	return newUsersChangeCmd("enable ID|EMAIL", "Enable a disabled account", 1,
		status(auth.StatusEnabled), func(auth.Account) string { return "enabled" })
}

func newUsersSetRoleCmd() *cobra.Command {
	return newUsersChangeCmd("set-role ID|EMAIL ROLE",
		"Set an account's role (e.g. user, admin); it takes effect in the account's next access token",
		2, func(args []string) auth.UserPatch { return auth.UserPatch{Role: &args[1]} },
		func(u auth.Account) string { return "role " + u.Role })
}
