package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Cleanup deletes a job's ended runs older than the age, oldest first in
// batches, and nothing else: not a run still running (however old), not
// a recent run, not another job's runs.
func TestRunsCleanup(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		runs := jobs.NewRuns(env.DB)
		old := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
		claim := func(job string, fire time.Time, finish bool) {
			t.Helper()
			r, err := runs.Claim(ctx, job, fire, 0, 1, "o")
			if err != nil {
				t.Fatal(err)
			}
			if finish {
				if err := runs.Finish(ctx, r, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := 0; i < 5; i++ {
			claim("cleaned", old.Add(time.Duration(i)*time.Second), true)
		}
		claim("cleaned", old.Add(10*time.Second), false) // still running
		claim("cleaned", time.Now().UTC().Truncate(time.Second), true)
		claim("other", old, true)
		count := func(job string) int {
			return dbtest.Count(t, env.DB, fmt.Sprintf(`SELECT count(*) FROM coord_job_runs WHERE job = '%s'`, job))
		}
		t.Run("deletes the old ended runs, in batches", func(t *testing.T) {
			n, err := runs.Cleanup(ctx, "cleaned", time.Hour, 2)
			if err != nil || n != 5 {
				t.Fatalf("deleted %d, %v; want 5", n, err)
			}
		})
		t.Run("keeps a running run, a recent one and other jobs' runs", func(t *testing.T) {
			if c := count("cleaned"); c != 2 {
				t.Fatalf("%d runs left of job cleaned, want 2 (the running one and the recent one)", c)
			}
			if c := count("other"); c != 1 {
				t.Fatalf("%d runs left of job other, want 1", c)
			}
		})
		t.Run("refuses a negative age and a bad name", func(t *testing.T) {
			if _, err := runs.Cleanup(ctx, "cleaned", -time.Second, 0); err == nil {
				t.Fatal("negative age accepted")
			}
			if _, err := runs.Cleanup(ctx, "bad\xffname", time.Hour, 0); err == nil || !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	})
}
