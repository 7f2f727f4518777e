package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/issuerapi"
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read the audit trail"}
	cmd.AddCommand(newAuditListCmd())
	return cmd
}

func newAuditListCmd() *cobra.Command {
	var (
		cfg                     config.Issuer
		user, typ, since, until string
		limit                   int
		asJSON                  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit entries, newest first (a table, or one JSON entry per line with --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			from, err := sinceFlag("since", since, now)
			if err != nil {
				return err
			}
			to, err := sinceFlag("until", until, now)
			if err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (every entry) or more", limit)
			}
			return withService(cmd.Context(), cfg, func(svc *auth.Service) error {
				q := auth.AuditQuery{Type: typ, Since: from, Until: to}
				if user != "" {
					if q.UserID, err = auditUser(cmd, svc, user); err != nil {
						return err
					}
				}
				out := newAuditPrinter(cmd, asJSON)
				n := 0
				err := eachPage(func(cursor string) ([]auth.AuditEvent, string, error) {
					q.Limit, q.Cursor = auth.MaxPageSize, cursor
					if limit > 0 {
						q.Limit = min(limit-n, auth.MaxPageSize)
					}
					page, err := svc.AdminAudit(cmd.Context(), auth.Operator(), q)
					if n += len(page.Events); limit > 0 && n >= limit {
						page.Next = ""
					}
					return page.Events, page.Next, err
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
	f.StringVar(&user, "user", "", "only entries about this account (an id, or an email)")
	f.StringVar(&typ, "type", "", "only entries of this event type (e.g. user.disabled)")
	f.StringVar(&since, "since", "", "only entries at or after this time: RFC 3339, or a duration before now (24h)")
	f.StringVar(&until, "until", "", "only entries before this time: RFC 3339, or a duration before now")
	f.IntVar(&limit, "limit", 100, "print at most this many entries (0: all)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line, as the admin API answers")
	cfg.StoreFlags(f)
	bindEnv(cmd)
	return cmd
}

// auditUser resolves --user: an email must name an account; an id is taken
// as given, so entries of an account deleted since remain reachable.
func auditUser(cmd *cobra.Command, svc *auth.Service, ref string) (string, error) {
	if !strings.Contains(ref, "@") {
		return ref, nil
	}
	u, err := svc.AdminFindUser(cmd.Context(), auth.Operator(), ref)
	if err != nil {
		return "", describe(err)
	}
	return u.ID, nil
}

// auditPrinter writes entries as a table or as JSON lines.
type auditPrinter struct {
	json *json.Encoder
	tw   *tabwriter.Writer
}

func newAuditPrinter(cmd *cobra.Command, asJSON bool) *auditPrinter {
	if asJSON {
		return &auditPrinter{json: json.NewEncoder(cmd.OutOrStdout())}
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTYPE\tUSER\tACTOR\tIP\tDATA")
	return &auditPrinter{tw: tw}
}

func (p *auditPrinter) print(e auth.AuditEvent) error {
	if p.json != nil {
		return p.json.Encode(issuerapi.AuditObject(e))
	}
	_, err := fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.OccurredAt.UTC().Format(time.RFC3339Nano), e.Type,
		dash(e.UserID), dash(e.ActorID), dash(e.IP), compactJSON(e.Data))
	return err
}

func (p *auditPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

// compactJSON keeps an entry's data on one table row.
func compactJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return "{}"
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(out)
}

// sinceFlag reads a time as RFC 3339, or as a duration before now.
func sinceFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time (2025-01-02T15:04:05Z) or a duration before now (24h)", name, v)
	}
	return now.Add(-d), nil
}
