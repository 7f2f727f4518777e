package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/issuerapi"
)

// The webhook commands act as auth.Operator(), as the users commands do:
// their audit entries carry {"via": "cli"}.

func newWebhooksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "Manage webhook endpoints and their deliveries"}
	cmd.AddCommand(newWebhooksCreateCmd(), newWebhooksListCmd(), newWebhooksDeleteCmd(),
		newWebhooksRotateSecretCmd(), newWebhooksDeliveriesCmd(), newWebhooksRetryCmd())
	return cmd
}

func newWebhooksCreateCmd() *cobra.Command {
	var (
		cfg                      config.Issuer
		url, format, description string
		events                   []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Register a webhook endpoint and print its secret (shown this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSealingService(cmd.Context(), cfg, func(svc *auth.Service) error {
				created, err := svc.AdminCreateWebhook(cmd.Context(), auth.Operator(), auth.WebhookInput{
					URL: url, Events: events, Description: description, Format: format,
				}, cliMeta)
				if err != nil {
					return describe(err)
				}
				e := created.Endpoint
				cmd.Printf("created webhook %s (%s, %s, events %s)\n", e.ID, e.URL, e.Format, strings.Join(e.Events, ","))
				cmd.Printf("secret: %s\n", created.Secret)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "https URL deliveries are posted to")
	f.StringArrayVar(&events, "event", nil, `event type to deliver (repeatable), or "*" for every type`)
	f.StringVar(&format, "format", auth.WebhookFormatSeed, "signature format: seed or standard-webhooks")
	f.StringVar(&description, "description", "", "free text for operators")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("event")
	cfg.StoreFlags(f)
	cfg.WebhookGuard.Flags(f)
	bindEnv(cmd)
	return cmd
}

func newWebhooksListCmd() *cobra.Command {
	var (
		cfg    config.Issuer
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List webhook endpoints, oldest first (a table, or one JSON endpoint object per line with --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				out := newTable(cmd.OutOrStdout(), asJSON, "ID\tURL\tFORMAT\tSTATUS\tEVENTS\tCREATED")
				err := eachPage(func(cursor string) ([]auth.WebhookEndpoint, string, error) {
					page, err := svc.AdminWebhooks(cmd.Context(), auth.Operator(), auth.PageQuery{Limit: auth.MaxPageSize, Cursor: cursor})
					return page.Endpoints, page.Next, err
				}, func(e auth.WebhookEndpoint) error {
					return out.row(issuerapi.WebhookObject(e), e.ID, e.URL, e.Format, e.Status, strings.Join(e.Events, ","), ts(&e.CreatedAt))
				})
				if err != nil {
					// An error of printing is internal: describe returns it as is.
					return describe(err)
				}
				return out.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line, as the admin API answers")
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newWebhooksDeleteCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a webhook endpoint and its deliveries; nothing more is sent to it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				if err := svc.AdminDeleteWebhook(cmd.Context(), auth.Operator(), args[0], cliMeta); err != nil {
					return describe(err)
				}
				cmd.Printf("deleted webhook %s\n", args[0])
				return nil
			})
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func newWebhooksRotateSecretCmd() *cobra.Command {
	var (
		cfg     config.Issuer
		overlap time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rotate-secret ID",
		Short: "Give a webhook endpoint a new secret and print it (shown this once); deliveries keep the old one until the overlap ends",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSealingService(cmd.Context(), cfg, func(svc *auth.Service) error {
				secret, err := svc.AdminRotateWebhookSecret(cmd.Context(), auth.Operator(), args[0], overlap, cliMeta)
				if err != nil {
					return describe(err)
				}
				cmd.Printf("rotated the secret of webhook %s; deliveries switch to it at %s\n", args[0], ts(ptrTime(time.Now().Add(overlap))))
				cmd.Printf("secret: %s\n", secret)
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&overlap, "overlap", auth.DefaultSecretOverlap, "how long deliveries keep signing with the old secret, so the receiver can add the new one first (0: switch now)")
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

func ptrTime(t time.Time) *time.Time { return &t }

func newWebhooksDeliveriesCmd() *cobra.Command {
	var (
		cfg    config.Issuer
		status string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "deliveries ID",
		Short: "List a webhook endpoint's deliveries, newest first (a table, or one JSON delivery object per line with --json)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				out := newTable(cmd.OutOrStdout(), asJSON, "ID\tEVENT\tTYPE\tSTATUS\tATTEMPTS\tLAST STATUS\tLAST ERROR\tNEXT ATTEMPT\tCREATED")
				err := eachPage(func(cursor string) ([]auth.WebhookDelivery, string, error) {
					q := auth.DeliveryQuery{Status: status, Limit: auth.MaxPageSize, Cursor: cursor}
					page, err := svc.AdminWebhookDeliveries(cmd.Context(), auth.Operator(), args[0], q)
					return page.Deliveries, page.Next, err
				}, func(d auth.WebhookDelivery) error {
					last := "-"
					if d.LastStatusCode != 0 {
						last = fmt.Sprint(d.LastStatusCode)
					}
					next := "-"
					if d.Status == auth.DeliveryPending {
						next = ts(d.NextAttemptAt)
					}
					return out.row(issuerapi.DeliveryObject(d), d.ID, d.EventID, d.EventType, d.Status, fmt.Sprint(d.Attempts),
						last, dash(oneLine(d.LastError)), next, ts(&d.CreatedAt))
				})
				if err != nil {
					// An error of printing is internal: describe returns it as is.
					return describe(err)
				}
				return out.flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only deliveries in this state: pending, delivered or failed")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line, as the admin API answers")
	cfg.StoreFlags(f)
	bindEnv(cmd)
	return cmd
}

func newWebhooksRetryCmd() *cobra.Command {
	var cfg config.Issuer
	cmd := &cobra.Command{
		Use:   "retry DELIVERY_ID",
		Short: "Deliver a delivery again (the same event id), at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				if err := svc.AdminRedeliver(cmd.Context(), auth.Operator(), args[0], cliMeta); err != nil {
					return describe(err)
				}
				cmd.Printf("queued delivery %s again; a running issuer sends it within its poll interval\n", args[0])
				return nil
			})
		},
	}
	cfg.StoreFlags(cmd.Flags())
	bindEnv(cmd)
	return cmd
}

// oneLine keeps a table row on one line: a receiver's error text may hold
// line breaks and tabs.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return s
}

// table writes rows as a tab-aligned table, or their objects as JSON lines.
type table struct {
	json *json.Encoder
	tw   *tabwriter.Writer
}

func newTable(w io.Writer, asJSON bool, header string) *table {
	if asJSON {
		return &table{json: json.NewEncoder(w)}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return &table{tw: tw}
}

func (t *table) row(object any, cells ...string) error {
	if t.json != nil {
		return t.json.Encode(object)
	}
	_, err := fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
	return err
}

func (t *table) flush() error {
	if t.tw != nil {
		return t.tw.Flush()
	}
	return nil
}
