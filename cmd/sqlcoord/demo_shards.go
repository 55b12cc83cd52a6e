package main

import (
	"context"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
)

func init() {
	register(scenario{name: "shards", title: "a sharded job on 1, 2 and 3 processes: wall time of one slot", run: demoShardSpread})
}

// The demonstration's job: shardsTotal shards, each a batch that takes
// shardWork (a sleep standing in for calls to other services: the
// instances share one machine's CPU here, so CPU-bound work would not
// show what more machines give).
const (
	shardsTotal = 12
	shardWork   = 400 * time.Millisecond
)

// newShardWorkerCmd is the helper process of the shards demonstration:
// one scheduler instance running the demo job until it is killed.
func newShardWorkerCmd() *cobra.Command {
	var job, fireS string
	cmd := &cobra.Command{
		Use: "__shard-worker", Hidden: true, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fire, err := time.Parse(time.RFC3339, fireS)
			if err != nil {
				return usageError{err}
			}
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			s := jobs.NewScheduler(db, jobs.Options{Tick: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			err = s.Register(jobs.Job{Name: job, Schedule: exactSecondSpec(fire), Shards: shardsTotal, Grace: 10 * time.Second,
				Run: func(ctx context.Context, in jobs.Info) error {
					select {
					case <-time.After(shardWork):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "READY")
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&job, "job", "", "job name")
	cmd.Flags().StringVar(&fireS, "fire", "", "the slot's fire time (RFC 3339, whole seconds)")
	return cmd
}

func demoShardSpread(ctx context.Context, e *demoEnv) error {
	if e.Self == "" {
		return fmt.Errorf("cannot find this executable")
	}
	e.printf("%d shards of %v each; every instance is its own OS process with the default ShardConcurrency 1\n", shardsTotal, shardWork)
	e.printf("(no MemberID, no membership group: each process claims the next unclaimed shard when it is free)\n")
	e.printf("   %-10s %-10s %-9s %s\n", "processes", "wall time", "speed-up", "shards per process")
	var one time.Duration
	for n := 1; n <= 3; n++ {
		wall, per, err := shardRound(ctx, e, n)
		if err != nil {
			return err
		}
		if n == 1 {
			one = wall
		}
		e.printf("   %-10d %-10v %-9s %s\n", n, wall.Round(10*time.Millisecond), fmt.Sprintf("%.2fx", float64(one)/float64(wall)), per)
	}
	e.printf("   wall time: from the slot's fire time to its last shard's finish, both by the database clock\n")
	return nil
}

// shardRound runs one slot of a fresh job on n helper processes and
// returns the slot's wall time and how many shards each process ran.
func shardRound(ctx context.Context, e *demoEnv, n int) (time.Duration, string, error) {
	job := fmt.Sprintf("demo-shards-%d-%d", n, time.Now().UnixNano())
	fire := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	rctx, cancel := context.WithCancel(ctx)
	var procs []*exec.Cmd
	defer func() {
		cancel() // kills the helpers
		for _, c := range procs {
			c.Wait()
		}
	}()
	for i := 0; i < n; i++ {
		c := demoChild(rctx, e.Self, core.ConnString(e.DB), "__shard-worker", "--job", job, "--fire", fire.Format(time.RFC3339))
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return 0, "", err
		}
		procs = append(procs, c)
	}
	runs := jobs.NewRuns(e.DB)
	deadline := time.Now().Add(time.Until(fire) + 2*shardsTotal*shardWork + 20*time.Second)
	for {
		recs, err := runs.List(ctx, job, fire, fire.Add(time.Second))
		if err != nil {
			return 0, "", err
		}
		done, last := 0, time.Time{}
		perOwner := map[string]int{}
		for _, r := range recs {
			if r.Status == jobs.Succeeded && r.FinishedAt.Valid {
				done++
				perOwner[r.Owner]++
				if r.FinishedAt.Time.After(last) {
					last = r.FinishedAt.Time
				}
			}
		}
		if done == shardsTotal {
			var counts []string
			for _, c := range perOwner {
				counts = append(counts, fmt.Sprint(c))
			}
			return last.Sub(fire), strings.Join(sortedDesc(counts), " + "), nil
		}
		if time.Now().After(deadline) {
			return 0, "", fmt.Errorf("%d processes: %d of %d shards done by %v", n, done, shardsTotal, deadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortedDesc(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if len(s[j]) > len(s[i]) || (len(s[j]) == len(s[i]) && s[j] > s[i]) {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}
