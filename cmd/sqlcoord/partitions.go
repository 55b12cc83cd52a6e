package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/partitions"
)

func newPartitionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "The outbox's history and the idempotency keys in partitions, dropped whole (status, enable, roll; keys …)",
		Long: `A partitioned coord_outbox drops its published history a partition at a time instead of deleting
rows: no dead tuples for VACUUM, no purge for InnoDB (docs/retention.md, "Partitions").
enable converts an installed outbox online (once, opt-in); roll, from cron every few minutes, makes
partitions ahead of the ids and drops those whose messages were all published longer ago than
--older-than. A pending or dead-lettered message keeps its partition: status says which and why.
"partitions keys" does the same for coord_idempotency, a partition per period.`,
	}
	cmd.AddCommand(newPartitionsStatusCmd(), newPartitionsEnableCmd(), newPartitionsRollCmd(), newPartitionsKeysCmd())
	return cmd
}

// partitionJSON is one partition in --json.
type partitionJSON struct {
	Name     string `json:"name"`
	From     *int64 `json:"from"` // null: unbounded
	To       *int64 `json:"to"`
	CatchAll bool   `json:"catch_all"`
	Rows     int64  `json:"rows_estimate"`
}

func bound(v int64) *int64 {
	if v == math.MinInt64 || v == math.MaxInt64 {
		return nil
	}
	return &v
}

func boundText(v int64) string {
	if v == math.MinInt64 || v == math.MaxInt64 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// printParts prints a partitioned table's partitions: with --json, the
// fields and "partitioned": true beside them; else a table (from names the
// lower bound's column, note what a partition's name gets after it, the
// catch-all's aside) and the footer lines.
func printParts(cmd *cobra.Command, ps []partitions.Partition, fields map[string]any, from string, note func(partitions.Partition) string, footer ...string) error {
	parts := []partitionJSON{}
	for _, p := range ps {
		parts = append(parts, partitionJSON{p.Name, bound(p.From), bound(p.To), p.CatchAll, p.Rows})
	}
	fields["partitioned"], fields["partitions"] = true, parts
	if done, err := printJSON(cmd, fields); done || err != nil {
		return err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\t"+from+"\tTO\tROWS (ESTIMATE)\t")
	for _, p := range ps {
		name := p.Name + note(p)
		if p.CatchAll {
			name += " (catch-all)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", name, boundText(p.From), boundText(p.To), p.Rows)
	}
	for _, f := range footer {
		fmt.Fprintln(w, f+"\t")
	}
	return w.Flush()
}

func newPartitionsStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List coord_outbox's partitions and the last id issued",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openInstalled(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			l, err := partitions.Status(cmd.Context(), db)
			if errors.Is(err, partitions.ErrNotPartitioned) {
				if done, err := printJSON(cmd, map[string]any{"partitioned": false}); done || err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "coord_outbox is not partitioned (sqlcoord partitions enable converts it)")
				return nil
			}
			if err != nil {
				return err
			}
			var footer []string
			if l.History != "" {
				footer = append(footer, l.History+" (history before enable)\t-\t-\t")
			}
			footer = append(footer, fmt.Sprintf("last id issued: %d\t\t\t", l.Issued))
			return printParts(cmd, l.Parts, map[string]any{"issued": l.Issued, "history": l.History}, "FROM", func(partitions.Partition) string { return "" }, footer...)
		},
	}
}

func newPartitionsEnableCmd() *cobra.Command {
	var o partitions.Options
	cmd := &cobra.Command{
		Use:   "enable",
		Short: "Convert coord_outbox into id-range partitions, online (once)",
		Long: `Converts an installed coord_outbox (schema 28 or later) into a partitioned table without stopping
producers or relays: PostgreSQL builds two indexes and validates the history's range without blocking
writers, then switches under one lock of milliseconds; MariaDB moves the messages not yet published into
the new table under LOCK TABLES (producers wait that long) and keeps the published history beside it as
coord_outbox_legacy until roll drops it whole. Run it once every instance runs this release.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Size < 1000 {
				return usageError{fmt.Errorf("--size %d: want at least 1000 ids per partition", o.Size)}
			}
			return runEnable(cmd, o.Ahead, fmt.Sprintf("coord_outbox is partitioned (%d ids a partition, %d ahead)", o.Size, o.Ahead),
				func(ctx context.Context, db *sqlcoord.DB) error { return partitions.Enable(ctx, db, o) })
		},
	}
	cmd.Flags().Int64Var(&o.Size, "size", 1_000_000, "ids per partition: about the messages of one period (the unit retention drops)")
	cmd.Flags().IntVar(&o.Ahead, "ahead", 2, "partitions kept made above the last id issued")
	return cmd
}

// runEnable checks --ahead, runs enable on the installed database and says
// how long it took (--json: {"enabled": true, "seconds": …}).
func runEnable(cmd *cobra.Command, ahead int, done string, enable func(context.Context, *sqlcoord.DB) error) error {
	if ahead < 1 || ahead > 100 {
		return usageError{fmt.Errorf("--ahead %d: want 1 to 100", ahead)}
	}
	db, err := openInstalled(cmd, writes)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	if err := enable(cmd.Context(), db); err != nil {
		return err
	}
	if printed, err := printJSON(cmd, map[string]any{"enabled": true, "seconds": time.Since(start).Seconds()}); printed || err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s in %v\n", done, time.Since(start).Round(time.Millisecond))
	return nil
}

func newPartitionsRollCmd() *cobra.Command {
	var o partitions.RollOptions
	cmd := &cobra.Command{
		Use:   "roll --older-than DURATION",
		Short: "Make partitions ahead and drop those whose messages were all published longer ago than --older-than",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("older-than") {
				return usageError{errors.New("--older-than is required (e.g. --older-than 168h): what is newer stays")}
			}
			if o.OlderThan <= 0 {
				return usageError{fmt.Errorf("--older-than %v: want a duration above 0", o.OlderThan)}
			}
			if o.Ahead < 1 || o.Ahead > 100 {
				return usageError{fmt.Errorf("--ahead %d: want 1 to 100", o.Ahead)}
			}
			db, err := openInstalled(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			res, err := partitions.Roll(cmd.Context(), db, o)
			if done, jerr := printJSON(cmd, map[string]any{"created": nonNil(res.Created), "dropped": nonNil(res.Dropped), "held": nonNil(res.Held), "ids_forgotten": res.IDsForgotten}); done || jerr != nil {
				if jerr != nil {
					return jerr
				}
				return err
			}
			out := cmd.OutOrStdout()
			for _, n := range res.Created {
				fmt.Fprintf(out, "made    %s\n", n)
			}
			for _, n := range res.Dropped {
				fmt.Fprintf(out, "dropped %s\n", n)
			}
			for _, h := range res.Held {
				fmt.Fprintf(out, "kept    %s: %s\n", h.Partition, h.Reason)
			}
			fmt.Fprintln(out, res.String())
			return err
		},
	}
	cmd.Flags().DurationVar(&o.OlderThan, "older-than", 0, "drop partitions whose messages were all published longer ago than this (required)")
	cmd.Flags().IntVar(&o.Ahead, "ahead", 2, "partitions kept made above the last id issued")
	return cmd
}

func newPartitionsKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "The idempotency keys in partitions of one period each, dropped whole (status, enable, roll)",
		Long: `A coord_idempotency partitioned by period drops old keys a partition at a time instead of deleting rows
(docs/retention.md, "Idempotency keys by period"). A key is refused or replayed for at least one
--period after its first use and forgotten at most two periods after it. enable converts the installed
table online (once, opt-in); roll, from cron at least once a period, makes the partitions ahead and drops
those no claim can meet any more.`,
	}
	cmd.AddCommand(newKeysStatusCmd(), newKeysEnableCmd(), newKeysRollCmd())
	return cmd
}

func newKeysStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List coord_idempotency's partitions, the period and the current one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openInstalled(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			l, err := partitions.KeysStatus(cmd.Context(), db)
			if errors.Is(err, partitions.ErrKeysNotPartitioned) {
				if done, err := printJSON(cmd, map[string]any{"partitioned": false}); done || err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "coord_idempotency is not partitioned (sqlcoord partitions keys enable converts it)")
				return nil
			}
			if err != nil {
				return err
			}
			return printParts(cmd, l.Parts, map[string]any{"period_seconds": l.Period.Seconds(), "current": l.Current, "legacy_until": l.LegacyUntil}, "FROM PERIOD",
				func(p partitions.Partition) string {
					if p.From == math.MinInt64 && !p.CatchAll {
						return " (keys before enable)"
					}
					return ""
				},
				fmt.Sprintf("period %v, now in period %d; keys before enable protected until period %d ends\t\t\t", l.Period, l.Current, l.LegacyUntil))
		},
	}
}

func newKeysEnableCmd() *cobra.Command {
	var o partitions.KeysOptions
	cmd := &cobra.Command{
		Use:   "enable --period DURATION",
		Short: "Convert coord_idempotency into partitions of one period each, online (once)",
		Long: `Converts an installed coord_idempotency (schema 29 or later) into a table partitioned by period without
stopping requests: PostgreSQL builds a unique index and validates a check without blocking writers, then
switches under one lock of milliseconds; MariaDB copies the table beside it (triggers mirror the changes
meanwhile) and swaps the two with one RENAME. The keys already there keep their protection. Every key
claimed afterwards is two rows (three during the first two periods). Run it once every instance runs
this release.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("period") {
				return usageError{errors.New("--period is required (e.g. --period 24h): keys are protected at least that long")}
			}
			if o.Period < time.Second || o.Period > 366*24*time.Hour {
				return usageError{fmt.Errorf("--period %v: want 1s to 366 days", o.Period)}
			}
			return runEnable(cmd, o.Ahead, fmt.Sprintf("coord_idempotency is partitioned (a partition per %v, %d ahead)", o.Period, o.Ahead),
				func(ctx context.Context, db *sqlcoord.DB) error { return partitions.EnableKeys(ctx, db, o) })
		},
	}
	cmd.Flags().DurationVar(&o.Period, "period", 0, "a partition's span of time and the keys' protection (required)")
	cmd.Flags().IntVar(&o.Ahead, "ahead", 2, "partitions kept made after the current period")
	return cmd
}

func newKeysRollCmd() *cobra.Command {
	var o partitions.KeysOptions
	cmd := &cobra.Command{
		Use:   "roll",
		Short: "Make the key partitions ahead and drop those no claim can meet any more",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Ahead < 1 || o.Ahead > 100 {
				return usageError{fmt.Errorf("--ahead %d: want 1 to 100", o.Ahead)}
			}
			db, err := openInstalled(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			res, err := partitions.RollKeys(cmd.Context(), db, o)
			if done, jerr := printJSON(cmd, map[string]any{"created": nonNil(res.Created), "dropped": nonNil(res.Dropped)}); done || jerr != nil {
				if jerr != nil {
					return jerr
				}
				return err
			}
			out := cmd.OutOrStdout()
			for _, n := range res.Created {
				fmt.Fprintf(out, "made    %s\n", n)
			}
			for _, n := range res.Dropped {
				fmt.Fprintf(out, "dropped %s\n", n)
			}
			fmt.Fprintf(out, "%d made ahead, %d dropped\n", len(res.Created), len(res.Dropped))
			return err
		},
	}
	cmd.Flags().IntVar(&o.Ahead, "ahead", 2, "partitions kept made after the current period")
	return cmd
}
