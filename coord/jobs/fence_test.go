package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// writeEffect is a job's effect the way the package doc asks for it: in one
// transaction, Fence first, the effect, Complete last.
func writeEffect(ctx context.Context, db *sqlcoord.DB, runs *jobs.Runs, run jobs.Run, owner string) error {
	ph := db.Dialect().Placeholder
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := jobs.Fence(ctx, db, tx, run); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (fire_time, owner, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, run.FireTime, owner, run.Attempt); err != nil {
		return err
	}
	if err := jobs.Complete(ctx, db, tx, run); err != nil {
		return err
	}
	return tx.Commit()
}

// A superseded runner's effect is refused by the database.
// 200 slots: A claims, goes stale, B takes over; then A writes (before or
// after B, alternating) — A's write is refused every time and every slot
// has exactly B's effect. Then 200 slots where A's write and B's takeover
// race: exactly one effect per slot, whoever wins.
func TestFencedEffects(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		createEffects(t, env)
		runs := jobs.NewRuns(env.DB)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		refused := 0
		for i := 0; i < 200; i++ {
			fire := base.Add(time.Duration(i) * time.Second)
			a, err := runs.Claim(ctx, "stale", fire, 0, 1, "A")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // A's heartbeat is now older than the 1ms grace
			won, err := runs.TakeOver(ctx, "stale", time.Millisecond, "B")
			if err != nil || len(won) != 1 || won[0].Attempt != 2 {
				t.Fatalf("slot %d: takeover %+v %v", i, won, err)
			}
			if i%2 == 0 { // B writes first
				if err := writeEffect(ctx, env.DB, runs, won[0], "B"); err != nil {
					t.Fatal(err)
				}
			}
			// A resumes and writes at once, never having looked at a context
			err = writeEffect(ctx, env.DB, runs, a, "A")
			if errors.Is(err, jobs.ErrSuperseded) {
				refused++
			} else {
				t.Errorf("slot %d: superseded runner's write: %v", i, err)
			}
			if i%2 == 1 {
				if err := writeEffect(ctx, env.DB, runs, won[0], "B"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM effects WHERE owner = 'A'`); n != 0 || refused != 200 {
			t.Fatalf("superseded writes refused %d of 200; %d committed", refused, n)
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM effects WHERE owner = 'B'`); n != 200 {
			t.Fatalf("B's effects %d of 200", n)
		}

		// the race: A writes while B tries to take over
		dbtest.Exec(t, env.DB, `DELETE FROM effects`)
		for i := 0; i < 200; i++ {
			fire := base.Add(time.Hour + time.Duration(i)*time.Second)
			a, err := runs.Claim(ctx, "race", fire, 0, 1, "A")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			var wg sync.WaitGroup
			var aErr, bErr error
			wg.Add(2)
			go func() { defer wg.Done(); aErr = writeEffect(ctx, env.DB, runs, a, "A") }()
			go func() {
				defer wg.Done()
				won, err := runs.TakeOver(ctx, "race", time.Millisecond, "B")
				if err != nil || len(won) == 0 {
					bErr = err
					return
				}
				bErr = writeEffect(ctx, env.DB, runs, won[0], "B")
			}()
			wg.Wait()
			for _, err := range []error{aErr, bErr} {
				if err != nil && !errors.Is(err, jobs.ErrSuperseded) && !sqlcoord.Retryable(err) {
					t.Fatalf("slot %d: %v", i, err)
				}
			}
		}
		rows, err := env.DB.QueryContext(ctx, `SELECT fire_time, count(*) FROM effects GROUP BY fire_time HAVING count(*) <> 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var ft time.Time
			var n int
			rows.Scan(&ft, &n)
			t.Errorf("slot %v: %d effects", ft, n)
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM effects`); n != 200 {
			t.Errorf("%d effects for 200 raced slots", n)
		}
		t.Logf("race: A won %d, B won %d of 200", dbtest.Count(t, env.DB, `SELECT count(*) FROM effects WHERE owner = 'A'`), dbtest.Count(t, env.DB, `SELECT count(*) FROM effects WHERE owner = 'B'`))
	})
}

// fencedJob is the helper processes' job: it announces its run, sleeps
// SLEEP without looking at its context (a runner that does not notice it
// was superseded), then writes its effect with Fence + Complete using a
// context that is never cancelled, and reports what the database said.
// With HANG_AFTER_COMMIT it stops after committing, before the scheduler
// records completion (the SIGKILL window).
func fencedJob(db *sqlcoord.DB) func(context.Context, jobs.Info) error {
	ph := db.Dialect().Placeholder
	owner := os.Getenv("OWNER")
	return func(ctx context.Context, in jobs.Info) error {
		fmt.Printf("RUNNING %d %d\n", in.FireTime.UnixMicro(), in.Attempt)
		time.Sleep(envDur("SLEEP"))
		wctx := context.WithoutCancel(ctx)
		err := func() error {
			tx, err := db.BeginTx(wctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := jobs.Fence(wctx, db, tx, in.Run()); err != nil {
				return err
			}
			if _, err := tx.ExecContext(wctx, `INSERT INTO effects (fire_time, owner, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, in.FireTime, owner, in.Attempt); err != nil {
				return err
			}
			if err := jobs.Complete(wctx, db, tx, in.Run()); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			fmt.Printf("REFUSED %d %d %v\n", in.Attempt, in.FireTime.UnixMicro(), err)
			return err
		}
		fmt.Printf("COMMITTED %d %d\n", in.Attempt, in.FireTime.UnixMicro())
		if os.Getenv("HANG_AFTER_COMMIT") != "" {
			time.Sleep(time.Hour)
		}
		return nil
	}
}

func effectsFor(t *testing.T, env *dbtest.Env, us int64) []string {
	rows, err := env.DB.QueryContext(context.Background(), `SELECT owner, attempt FROM effects WHERE fire_time = `+env.DB.Dialect().Placeholder(1)+` ORDER BY attempt`, time.UnixMicro(us).UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		var a int
		rows.Scan(&o, &a)
		out = append(out, fmt.Sprintf("%s#%d", o, a))
	}
	return out
}

// The same with real processes: runner A is SIGSTOPped past its grace
// while running a slot, B takes the slot over and writes; A is resumed and
// writes at once, before it can notice anything — the database refuses
// A's write. Then: A is SIGKILLed right after committing effect+completion
// (before the scheduler's own Finish) — B does not take the slot over.
func TestFencedEffectsAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		createEffects(t, env)
		t.Run("SIGSTOP past grace", func(t *testing.T) {
			for round := 0; round < 2; round++ {
				// a fresh start: the previous round's killed runner left
				// running rows that this round's scheduler would take over
				dbtest.Exec(t, env.DB, `DELETE FROM effects`)
				dbtest.Exec(t, env.DB, `DELETE FROM coord_job_runs`)
				a := dbtest.Spawn(t, "fenced", "DSN="+env.DSN, "SPEC=* * * * * *", "RUN_FOR=60s", "GRACE=600ms", "SLEEP=300ms", "OWNER=A")
				line := a.WaitLine(t, "RUNNING", 20*time.Second)
				a.Signal(syscall.SIGSTOP)
				us, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				b := dbtest.Spawn(t, "fenced", "DSN="+env.DSN, "SPEC=0 0 0 1 1 *", "RUN_FOR=60s", "GRACE=600ms", "SLEEP=0s", "OWNER=B", "JOB=fenced")
				// B takes A's slot over (attempt 2) and commits its effect
				deadline := time.Now().Add(20 * time.Second)
				for len(effectsFor(t, env, us)) == 0 {
					if time.Now().After(deadline) {
						t.Fatal("B never took the slot over")
					}
					time.Sleep(20 * time.Millisecond)
				}
				a.Signal(syscall.SIGCONT)
				// A's line about its stale write of that slot (A runs a slot
				// every second: lines of other slots' runs may come first)
				var got string
				for got == "" {
					l := a.WaitLine(t, "", 10*time.Second)
					f := strings.Fields(l)
					if (strings.HasPrefix(l, "REFUSED") || strings.HasPrefix(l, "COMMITTED")) && len(f) >= 3 && f[2] == strconv.FormatInt(us, 10) {
						got = l
					}
				}
				if !strings.HasPrefix(got, "REFUSED 1") || !strings.Contains(got, "superseded") {
					t.Errorf("round %d: resumed runner: %q", round, got)
				}
				if e := effectsFor(t, env, us); len(e) != 1 || e[0] != "B#2" {
					t.Errorf("round %d: effects of the slot: %v, want [B#2]", round, e)
				}
				a.Kill()
				b.Kill()
			}
		})
		t.Run("SIGKILL after commit", func(t *testing.T) {
			dbtest.Exec(t, env.DB, `DELETE FROM effects`)
			dbtest.Exec(t, env.DB, `DELETE FROM coord_job_runs`)
			a := dbtest.Spawn(t, "fenced", "DSN="+env.DSN, "SPEC=* * * * * *", "RUN_FOR=60s", "GRACE=600ms", "SLEEP=0s", "OWNER=A", "HANG_AFTER_COMMIT=1")
			line := a.WaitLine(t, "RUNNING", 20*time.Second)
			us, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			a.WaitLine(t, "COMMITTED", 10*time.Second)
			a.Kill()
			b := dbtest.Spawn(t, "fenced", "DSN="+env.DSN, "SPEC=0 0 0 1 1 *", "RUN_FOR=60s", "GRACE=600ms", "SLEEP=0s", "OWNER=B")
			time.Sleep(2 * time.Second) // > grace + B's takeover scans
			b.Kill()
			if e := effectsFor(t, env, us); len(e) != 1 || e[0] != "A#1" {
				t.Errorf("effects of the killed runner's slot: %v, want [A#1]", e)
			}
			var status string
			var attempt int
			if err := env.DB.QueryRowContext(context.Background(), `SELECT status, attempt FROM coord_job_runs WHERE job = 'fenced' AND fire_time = `+env.DB.Dialect().Placeholder(1), time.UnixMicro(us).UTC()).Scan(&status, &attempt); err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatal(err)
			}
			if status != jobs.Succeeded || attempt != 1 {
				t.Errorf("run is %s attempt %d, want succeeded attempt 1", status, attempt)
			}
		})
	})
}
