package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/saga"
)

func newSagaCmd() *cobra.Command {
	cmd := groupCmd("saga", "Drive and inspect global transactions: sagas and TCC (coord_gtx)")
	var filter string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List global transactions, newest first (--filter live, stuck, ended or all)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError{fmt.Errorf("--limit %d: want at least 1", limit)}
			}
			switch saga.Filter(filter) {
			case saga.All, saga.Live, saga.Stuck, saga.Ended:
			default:
				return usageError{fmt.Errorf("--filter %q: want live, stuck, ended or all", filter)}
			}
			db, err := openInstalled(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			gs, err := saga.List(cmd.Context(), db, saga.Filter(filter), limit)
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, gs); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GID\tMODE\tSTATUS\tSTEP\tTRIES\tATTEMPT\tOWNER\tCREATED (UTC)\tREASON / LAST ERROR")
			for _, g := range gs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", g.GID, g.Mode, statusWord(g), g.Step, g.Tries, g.Attempt, g.Owner,
					g.Created.UTC().Format(time.RFC3339), oneLine(why2(g.Reason, g.LastErr)))
			}
			return w.Flush()
		},
	}
	list.Flags().StringVar(&filter, "filter", "live", "live (running, confirming, compensating), stuck, ended or all")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")

	show := &cobra.Command{
		Use: "show GID", Short: "Show a global transaction and its branches", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openInstalled(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			g, err := getSaga(cmd, db, args[0])
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, g); done || err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "gid:       %s\nmode:      %s\nstatus:    %s\nstep:      %d (tries %d)\nattempt:   %d (owner %s)\ncreated:   %s\nupdated:   %s\n",
				g.GID, g.Mode, statusWord(g), g.Step, g.Tries, g.Attempt, g.Owner, g.Created.UTC().Format(time.RFC3339Nano), g.Updated.UTC().Format(time.RFC3339Nano))
			if !g.Status.Ended() && !g.Stuck {
				fmt.Fprintf(out, "due in:    %v\n", g.DueIn.Round(time.Millisecond))
			}
			if g.Status == saga.Running {
				fmt.Fprintf(out, "deadline:  %v (forward phase)\n", g.DeadlineIn.Round(time.Millisecond))
			}
			if g.Reason != "" {
				fmt.Fprintf(out, "reason:    %s\n", oneLine(g.Reason))
			}
			if g.LastErr != "" {
				fmt.Fprintf(out, "last error: %s\n", oneLine(g.LastErr))
			}
			w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "\n#\tBRANCH\tTARGET\tSTATUS\tTRIES\tLAST ERROR")
			for i, b := range g.Branches {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\n", i, b.Name, b.Target, b.Status, b.Tries, oneLine(b.LastErr))
			}
			return w.Flush()
		},
	}
	retry := &cobra.Command{
		Use: "retry GID", Short: "Make a stuck global transaction due again (its current step is called again)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openInstalled(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := operatorErr(saga.Retry(cmd.Context(), db, args[0])); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is due again\n", args[0])
			return nil
		},
	}
	var reason string
	resolve := &cobra.Command{
		Use: "resolve GID --reason TEXT", Short: "End a stuck global transaction as resolved by a person", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageError{errors.New("--reason is required: say what was done by hand")}
			}
			db, err := openInstalled(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := operatorErr(saga.Resolve(cmd.Context(), db, args[0], reason)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s resolved\n", args[0])
			return nil
		},
	}
	resolve.Flags().StringVar(&reason, "reason", "", "what a person did (recorded in the transaction)")

	var opts saga.Options
	var once bool
	var listen string
	run := &cobra.Command{
		Use:   "run",
		Short: "Drive global transactions whose branches are HTTP endpoints until interrupted (run as many as you like)",
		Long: `Drive global transactions: claim due ones, call their branches (http:// and https:// targets; a Go
function target needs a driver in the program that registered it), retry, compensate, and mark
what cannot finish as stuck. Stops on SIGINT/SIGTERM after releasing what it holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := metricsAddr(listen)
			if err != nil {
				return err
			}
			db, reg, err := openMetered(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			opts.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			c, err := saga.New(db, opts)
			if err != nil {
				return usageError{err}
			}
			if once {
				n, err := c.RunDue(cmd.Context())
				fmt.Fprintf(cmd.OutOrStdout(), "drove %d global transaction(s)\n", n)
				return err
			}
			if addr != "" {
				stop, err := serveMetrics(addr, reg, opts.Logger, "metrics", nil)
				if err != nil {
					return err
				}
				defer stop()
			}
			opts.Logger.Info("saga driver running", "database", db.String())
			return c.Run(cmd.Context())
		},
	}
	run.Flags().StringVar(&opts.Owner, "owner", "", "driver name shown in the table (default host-pid)")
	run.Flags().DurationVar(&opts.Lease, "lease", 30*time.Second, "how long a claim lasts without progress")
	run.Flags().DurationVar(&opts.CallTimeout, "call-timeout", 10*time.Second, "bound on one branch call")
	run.Flags().IntVar(&opts.Workers, "workers", 4, "transactions driven at once")
	run.Flags().IntVar(&opts.StuckAfter, "stuck-after", 20, "failed confirm/cancel/compensate calls in a row before a person is needed")
	run.Flags().StringVar(&listen, "listen", "", "address for /metrics (branch calls: sqlcoord_call_duration_seconds with op saga.action, saga.try, …): 9090 or :9090 bind 127.0.0.1")
	run.Flags().BoolVar(&once, "once", false, "drive what is due now, then exit")
	cmd.AddCommand(list, show, retry, resolve, run)
	return cmd
}

// getSaga is saga.Get with the CLI's exit codes.
func getSaga(cmd *cobra.Command, db *sqlcoord.DB, gid string) (saga.Info, error) {
	g, err := saga.Get(cmd.Context(), db, gid)
	return g, operatorErr(err)
}

// operatorErr maps saga's errors to exit codes: an unknown gid exits 5,
// an invalid one 2.
func operatorErr(err error) error {
	switch {
	case errors.Is(err, saga.ErrNotFound):
		return notFound(err)
	case errors.Is(err, saga.ErrInvalid):
		return usageError{err}
	}
	return err
}

func statusWord(g saga.Info) string {
	if g.Stuck {
		return string(g.Status) + " (STUCK)"
	}
	return string(g.Status)
}

func why2(reason, lastErr string) string {
	switch {
	case reason != "" && lastErr != "" && !strings.Contains(reason, lastErr):
		return reason + "; last error: " + lastErr
	case reason != "":
		return reason
	}
	return lastErr
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
