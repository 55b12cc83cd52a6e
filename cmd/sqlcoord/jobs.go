package main

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

func newJobsCmd() *cobra.Command {
	var job, schedule, zone, fireS string
	var since time.Duration
	var shards int
	cmd := groupCmd("jobs", "Inspect and re-run scheduled job slots (coord_job_runs)")
	need := func() error {
		if job == "" {
			return usageError{fmt.Errorf("--job is required")}
		}
		if err := valid.Text("--job", job, 128); err != nil {
			return usageError{err}
		}
		return nil
	}
	list := &cobra.Command{
		Use: "list", Short: "List registered jobs, or with --job the runs of one job planned in the last --since", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sched *jobs.Schedule
			if job != "" {
				if err := need(); err != nil {
					return err
				}
			}
			if schedule != "" {
				loc, err := time.LoadLocation(zone)
				if err != nil {
					return usageError{fmt.Errorf("--tz: %w", err)}
				}
				if sched, err = jobs.ParseSchedule(schedule, loc); err != nil {
					return usageError{fmt.Errorf("--schedule: %w", err)}
				}
			}
			if since <= 0 || shards < 0 {
				return usageError{fmt.Errorf("--since %v, --shards %d: want positive values", since, shards)}
			}
			db, err := openDB(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			if job == "" {
				defs, err := jobs.NewRuns(db).Jobs(cmd.Context())
				if err != nil {
					return err
				}
				if done, err := printJSON(cmd, nonNil(defs)); done || err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "JOB\tSCHEDULE\tTIME ZONE\tSHARDS\tREGISTERED (UTC)")
				for _, d := range defs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", d.Name, d.Schedule, d.Location, d.Shards, d.UpdatedAt.UTC().Format(time.RFC3339))
				}
				return w.Flush()
			}
			now := time.Now()
			recs, err := jobs.NewRuns(db).List(cmd.Context(), job, now.Add(-since), now.Add(24*time.Hour))
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				defs, err := jobs.NewRuns(db).Jobs(cmd.Context())
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(defs, func(d jobs.Definition) bool { return d.Name == job }) {
					return notFound(fmt.Errorf("jobs list: no job %s: not registered, and no run in the last %v", valid.Quote(job), since))
				}
			}
			var miss []time.Time
			if sched != nil {
				if miss, err = jobs.NewRuns(db).Missing(cmd.Context(), job, sched, max(shards, 1), now.Add(-since), now); err != nil {
					return err
				}
			}
			views := []runView{}
			for _, r := range recs {
				views = append(views, viewRun(r))
			}
			if done, err := printJSON(cmd, map[string]any{"job": job, "runs": views, "not_succeeded": nonNil(miss)}); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "FIRE TIME (UTC)\tSHARD\tSTATUS\tATTEMPT\tFAILURES\tOWNER\tERROR / REASON")
			for _, r := range recs {
				fmt.Fprintf(w, "%s\t%d/%d\t%s\t%d\t%d\t%s\t%s\n", r.FireTime.Format(time.RFC3339Nano), r.Shard, r.ShardTotal, statusText(r), r.Attempt, r.Failures, r.Owner, why(r))
			}
			for _, m := range miss {
				fmt.Fprintf(w, "%s\t-\tNOT SUCCEEDED\t\t\t\n", m.Format(time.RFC3339Nano))
			}
			return w.Flush()
		},
	}
	list.Flags().StringVar(&schedule, "schedule", "", "cron expression: also list planned slots without a succeeded run")
	list.Flags().StringVar(&zone, "tz", "UTC", "time zone of --schedule")
	list.Flags().IntVar(&shards, "shards", 1, "shards per slot, with --schedule")
	list.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back")
	rerun := &cobra.Command{
		Use: "rerun", Short: "Mark a slot of a registered job to run again (any live scheduler of the job picks it up)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(); err != nil {
				return err
			}
			if shards < 0 {
				return usageError{fmt.Errorf("--shards %d: must be positive", shards)}
			}
			fire, err := time.Parse(time.RFC3339Nano, fireS)
			if err != nil {
				return usageError{fmt.Errorf("--fire: %v (use RFC 3339, as `jobs list` prints)", err)}
			}
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			n, err := jobs.NewRuns(db).MarkRerun(cmd.Context(), job, fire, shards)
			if errors.Is(err, jobs.ErrUnknownJob) || errors.Is(err, jobs.ErrNotOnSchedule) {
				return notFound(err) // the database does not know that slot
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "marked %d shard run(s) of %s at %s for rerun\n", n, job, fire.UTC().Format(time.RFC3339Nano))
			return nil
		},
	}
	rerun.Flags().StringVar(&fireS, "fire", "", "planned fire time of the slot (RFC 3339)")
	rerun.Flags().IntVar(&shards, "shards", 0, "shards of the slot (default: as registered)")
	cmd.PersistentFlags().StringVar(&job, "job", "", "job name")
	cmd.AddCommand(list, rerun)
	return cmd
}

// runView is a run as `jobs list --json` prints it.
type runView struct {
	jobs.Run
	Status      string     `json:"status"`
	StartedAt   *time.Time `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Error       string     `json:"error"`
	RetryAt     *time.Time `json:"retry_at"`
	Reason      string     `json:"reason"`
}

// statusText is a run's status, with the retry time when it waits.
func statusText(r jobs.Record) string {
	if r.Status == jobs.Retrying && r.RetryAt.Valid {
		return "retry at " + r.RetryAt.Time.UTC().Format(time.RFC3339)
	}
	return r.Status
}

// why is a run's last error and the reason for its status.
func why(r jobs.Record) string {
	switch {
	case r.Error != "" && r.Reason != "":
		return r.Reason + ": " + r.Error
	case r.Error != "":
		return r.Error
	}
	return r.Reason
}

func viewRun(r jobs.Record) runView {
	at := func(t sql.NullTime) *time.Time {
		if !t.Valid {
			return nil
		}
		return &t.Time
	}
	return runView{Run: r.Run, Status: r.Status, StartedAt: at(r.StartedAt), HeartbeatAt: at(r.HeartbeatAt), FinishedAt: at(r.FinishedAt), Error: r.Error,
		RetryAt: at(r.RetryAt), Reason: r.Reason}
}
