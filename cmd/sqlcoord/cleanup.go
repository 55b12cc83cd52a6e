package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/txn"
)

// cleanupTable is one table `sqlcoord cleanup` can clean: the library's
// own cleanup for it (docs/retention.md), never SQL of the CLI's.
type cleanupTable struct {
	name, what string
	run        func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error)
}

// cleanupTables in the order they run: what grows fastest first.
var cleanupTables = []cleanupTable{
	{"outbox", "published outbox messages", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return outbox.New(db).Cleanup(ctx, age, batch)
	}},
	{"inbox", "consumed message ids, every consumer's", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		in, err := outbox.NewInbox(db, "sqlcoord-cleanup") // the cleanup is not per consumer
		if err != nil {
			return 0, err
		}
		return in.Cleanup(ctx, age, batch)
	}},
	{"keys", "done idempotency keys", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return txn.NewKeys(db, txn.KeysOptions{}).Cleanup(ctx, age, batch)
	}},
	{"barrier", "TCC/saga barrier rows", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return txn.NewBarrier(db).Cleanup(ctx, age, batch)
	}},
	{"markers", "commit markers of txn.Do", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return txn.CleanupMarkers(ctx, db, age, batch)
	}},
	{"sagas", "ended sagas and their branches", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return saga.Cleanup(ctx, db, age, batch)
	}},
	{"jobs", "ended job runs of every registered job", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		runs := jobs.NewRuns(db)
		defs, err := runs.Jobs(ctx)
		if err != nil {
			return 0, err
		}
		var total int64
		for _, d := range defs {
			n, err := runs.Cleanup(ctx, d.Name, age, batch)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}},
	{"sessions", "web sessions expired longer ago", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return session.Cleanup(ctx, db, age, batch)
	}},
	{"members", "members gone longer ago", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return membership.Cleanup(ctx, db, age, batch)
	}},
	{"locks", "console names of locks first used longer ago", func(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
		return coord.New(db).CleanupLocks(ctx, age, batch)
	}},
}

// cleanupResult is one table's line of the report (and of --json).
type cleanupResult struct {
	Table   string  `json:"table"`
	Deleted int64   `json:"deleted"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// parseCleanupTables reads --tables: "all" or names from cleanupTables,
// each once.
func parseCleanupTables(s string) ([]cleanupTable, error) {
	if strings.TrimSpace(s) == "all" {
		return cleanupTables, nil
	}
	var names []string
	for _, t := range cleanupTables {
		names = append(names, t.name)
	}
	var out []cleanupTable
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n) // "outbox, keys" as relay --topics reads it
		i := slices.Index(names, n)
		if i < 0 {
			return nil, usageError{fmt.Errorf("--tables: %q is not a table sqlcoord cleans (want all, or some of %s)", redact.Text(n), strings.Join(names, ","))}
		}
		if slices.ContainsFunc(out, func(t cleanupTable) bool { return t.name == n }) {
			return nil, usageError{fmt.Errorf("--tables: %q named twice", n)}
		}
		out = append(out, cleanupTables[i])
	}
	return out, nil
}

func newCleanupCmd() *cobra.Command {
	var olderThan time.Duration
	var tablesS string
	var batch int
	var duty, rate float64
	cmd := &cobra.Command{
		Use:   "cleanup --older-than DURATION",
		Short: "Delete what nobody needs any more (published messages, done keys, ended runs…) older than --older-than, paced",
		Long: `Runs the library's cleanups (docs/retention.md) once, table by table, and reports the rows each deleted.
Each batch is its own short transaction: an interrupted cleanup keeps what it deleted; run it again at any time,
from cron or a job, from any number of processes. --duty paces it (sqlcoord.Options.CleanupDuty): after each
batch it pauses so that deleting takes that share of its time, leaving the server to producers; --rate caps
the rows per second (sqlcoord.Options.CleanupRate), the bound to size against your producers' rate.

--older-than has no default: deleting an idempotency key lets a retried request run again, deleting an inbox id
lets a redelivered message through, deleting a barrier row lets a late Try run — choose it above your clients'
retry horizon and your relays' redelivery window.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// every usage error before anything connects
			if !cmd.Flags().Changed("older-than") {
				return usageError{errors.New("--older-than is required (e.g. --older-than 168h): what is newer stays")}
			}
			if olderThan <= 0 {
				return usageError{fmt.Errorf("--older-than %v: want a duration above 0 (what finished longer ago than it is deleted; 0 would take everything, keys still protecting retries included)", olderThan)}
			}
			if batch < 1 || batch > 100000 {
				return usageError{fmt.Errorf("--batch %d: want 1 to 100000", batch)}
			}
			if err := core.ValidCleanupPace(duty, rate); err != nil {
				return usageError{fmt.Errorf("--duty %v, --rate %v: %w", duty, rate, err)}
			}
			tables, err := parseCleanupTables(tablesS)
			if err != nil {
				return err
			}
			db, err := openInstalled(cmd, writes, sqlcoord.Options{CleanupDuty: duty, CleanupRate: rate})
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := cmd.Context()
			var results []cleanupResult
			var total int64
			var failed []string
			for _, t := range tables {
				if ctx.Err() != nil {
					break // interrupted: what ran is reported
				}
				start := time.Now()
				n, err := t.run(ctx, db, olderThan, batch)
				r := cleanupResult{Table: t.name, Deleted: n, Seconds: time.Since(start).Seconds()}
				if err != nil {
					r.Error = errs.Once(redact.Text(err.Error(), dsnFrom(cmd)))
					failed = append(failed, t.name)
				}
				results, total = append(results, r), total+n
			}
			done, err := printJSON(cmd, map[string]any{"older_than_seconds": olderThan.Seconds(), "duty": duty, "rate": rate, "tables": nonNil(results), "deleted": total})
			if err != nil {
				return err
			}
			if !done {
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(w, "TABLE\tDELETED\tTIME\t")
				for _, r := range results {
					took := time.Duration(r.Seconds * float64(time.Second)).Round(time.Millisecond)
					if r.Error != "" {
						fmt.Fprintf(w, "%s\t%d\t%v\tFAILED: %s\n", r.Table, r.Deleted, took, r.Error)
						continue
					}
					fmt.Fprintf(w, "%s\t%d\t%v\t\n", r.Table, r.Deleted, took)
				}
				fmt.Fprintf(w, "total\t%d\t\t\n", total)
				if err := w.Flush(); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("cleanup of %s failed (the other tables ran; deleted rows stay deleted)", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	var names []string
	for _, t := range cleanupTables {
		names = append(names, t.name+" ("+t.what+")")
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "delete only what finished longer ago than this (required; e.g. 168h)")
	cmd.Flags().StringVar(&tablesS, "tables", "all", "all, or comma-separated: "+strings.Join(names, ", "))
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per statement and transaction")
	cmd.Flags().Float64Var(&duty, "duty", 0.25, "share of the time spent deleting (0 or 1: no pause); the rest is left to producers")
	cmd.Flags().Float64Var(&rate, "rate", 0, "at most this many rows per second per table (0: no cap; with --duty the longer pause wins)")
	return cmd
}
