package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/partitions"
)

func newPartitionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "The outbox's history in id-range partitions, dropped whole (status, enable, roll)",
		Long: `A partitioned coord_outbox drops its published history a partition at a time instead of deleting
rows: no dead tuples for VACUUM, no purge for InnoDB (docs/retention.md, "Partitions").
enable converts an installed outbox online (once, opt-in); roll, from cron every few minutes, makes
partitions ahead of the ids and drops those whose messages were all published longer ago than
--older-than. A pending or dead-lettered message keeps its partition: status says which and why.`,
	}
	cmd.AddCommand(newPartitionsStatusCmd(), newPartitionsEnableCmd(), newPartitionsRollCmd())
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
			parts := []partitionJSON{}
			for _, p := range l.Parts {
				parts = append(parts, partitionJSON{p.Name, bound(p.From), bound(p.To), p.CatchAll, p.Rows})
			}
			if done, err := printJSON(cmd, map[string]any{"partitioned": true, "issued": l.Issued, "history": l.History, "partitions": parts}); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PARTITION\tFROM\tTO\tROWS (ESTIMATE)\t")
			for _, p := range l.Parts {
				name := p.Name
				if p.CatchAll {
					name += " (catch-all)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", name, boundText(p.From), boundText(p.To), p.Rows)
			}
			if l.History != "" {
				fmt.Fprintf(w, "%s (history before enable)\t-\t-\t\t\n", l.History)
			}
			fmt.Fprintf(w, "last id issued: %d\t\t\t\t\n", l.Issued)
			return w.Flush()
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
			if o.Ahead < 1 || o.Ahead > 100 {
				return usageError{fmt.Errorf("--ahead %d: want 1 to 100", o.Ahead)}
			}
			db, err := openInstalled(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			start := time.Now()
			if err := partitions.Enable(cmd.Context(), db, o); err != nil {
				return err
			}
			if done, err := printJSON(cmd, map[string]any{"enabled": true, "seconds": time.Since(start).Seconds()}); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "coord_outbox is partitioned (%d ids a partition, %d ahead) in %v\n", o.Size, o.Ahead, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().Int64Var(&o.Size, "size", 1_000_000, "ids per partition: about the messages of one period (the unit retention drops)")
	cmd.Flags().IntVar(&o.Ahead, "ahead", 2, "partitions kept made above the last id issued")
	return cmd
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
