package jobs_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func createEffects(t *testing.T, env *dbtest.Env) {
	t.Helper()
	dbtest.Exec(t, env.DB, `CREATE TABLE effects (fire_time `+timeCol(env)+` NOT NULL, owner VARCHAR(40) NOT NULL, attempt INT NOT NULL)`)
}

// startSlowRunner spawns instance A of the "slow" job (grace 1s, working
// for sleep per run) and returns once A runs a slot, with that slot's fire
// time (also as Unix microseconds, as A prints it).
func startSlowRunner(t *testing.T, env *dbtest.Env, spec, sleep string) (*dbtest.Proc, time.Time, int64) {
	t.Helper()
	a := dbtest.Spawn(t, "slow", "DSN="+env.DSN, "SPEC="+spec, "RUN_FOR=60s", "GRACE=1s", "SLEEP="+sleep, "OWNER=A")
	line := a.WaitLine(t, "RUNNING", 20*time.Second)
	us, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
	if err != nil {
		t.Fatalf("A said %q: %v", line, err)
	}
	return a, time.UnixMicro(us).UTC(), us
}

func timeCol(env *dbtest.Env) string {
	if env.Family == "mysql" {
		return "DATETIME(6)"
	}
	return "TIMESTAMPTZ"
}

// Three scheduler processes, clocks -300ms, 0 and +300ms, a job every
// second: every slot ran exactly once (raw effect rows, no unique key).
func TestExactlyOncePerSlotAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		createEffects(t, env)
		start := time.Now()
		var ps []*dbtest.Proc
		for i, off := range []string{"-300ms", "0s", "300ms"} {
			ps = append(ps, dbtest.Spawn(t, "effects", "DSN="+env.DSN, "SPEC=* * * * * *", "OFFSET="+off,
				"RUN_FOR=5s", "GRACE=5s", fmt.Sprintf("OWNER=p%d", i)))
		}
		for _, p := range ps {
			p.WaitLine(t, "EXIT", 30*time.Second)
		}
		end := time.Now()
		rows, err := env.DB.QueryContext(context.Background(), `SELECT fire_time, count(*) FROM effects GROUP BY fire_time ORDER BY fire_time`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[int64]int{}
		owners := 0
		for rows.Next() {
			var ft time.Time
			var n int
			rows.Scan(&ft, &n)
			got[ft.Unix()] = n
			if n != 1 {
				t.Errorf("slot %v ran %d times", ft, n)
			}
		}
		owners = dbtest.Count(t, env.DB, `SELECT count(DISTINCT owner) FROM effects`)
		// every slot while all three ran is present
		missing := 0
		for s := start.Add(2500 * time.Millisecond).Unix(); s < end.Add(-1500*time.Millisecond).Unix(); s++ {
			if got[s] == 0 {
				missing++
			}
		}
		if missing > 0 || len(got) < 3 {
			t.Fatalf("%d slots missing; %d slots ran", missing, len(got))
		}
		t.Logf("%d slots, each run exactly once, by %d different instances", len(got), owners)
	})
}

// kill -9 of the instance running a slot: another instance takes over after
// the grace period with attempt 2.
func TestKilledRunnerTakenOver(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		createEffects(t, env)
		spec := "* * * * * *"
		a, fire, _ := startSlowRunner(t, env, spec, "60s")
		a.Kill()
		killed := time.Now()
		// instance B (this process) runs the same job, fast
		sch := jobs.NewScheduler(env.DB, jobs.Options{Owner: "B", Tick: 20 * time.Millisecond})
		done := make(chan time.Time, 100)
		sch.Register(jobs.Job{Name: "slow", Schedule: spec, Grace: time.Second, Run: func(ctx context.Context, in jobs.Info) error {
			if in.FireTime.Equal(fire) {
				done <- time.Now()
				if in.Attempt != 2 {
					return fmt.Errorf("attempt %d", in.Attempt)
				}
			}
			return nil
		}})
		sctx, cancel := context.WithCancel(ctx)
		go sch.Run(sctx)
		defer cancel()
		select {
		case at := <-done:
			t.Logf("slot %v taken over %v after kill -9 (grace 1s)", fire, at.Sub(killed))
			if at.Sub(killed) > 6*time.Second {
				t.Fatalf("takeover took %v", at.Sub(killed))
			}
		case <-time.After(15 * time.Second):
			t.Fatal("dead run never taken over")
		}
		time.Sleep(200 * time.Millisecond)
		recs, _ := sch.Runs().List(ctx, "slow", fire, fire.Add(time.Microsecond))
		if len(recs) != 1 || recs[0].Attempt != 2 || recs[0].Status != jobs.Succeeded || recs[0].Owner != "B" {
			t.Fatalf("run record %+v", recs)
		}
	})
}

// A runner frozen (SIGSTOP) past its grace is superseded; when it resumes,
// its completion is refused and its context cancelled.
func TestPausedRunnerRejected(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		createEffects(t, env)
		spec := "* * * * * *"
		a, fire, us := startSlowRunner(t, env, spec, "2500ms")
		a.Signal(syscall.SIGSTOP)
		sch := jobs.NewScheduler(env.DB, jobs.Options{Owner: "B", Tick: 20 * time.Millisecond})
		took := make(chan struct{}, 10)
		sch.Register(jobs.Job{Name: "slow", Schedule: spec, Grace: time.Second, Run: func(ctx context.Context, in jobs.Info) error {
			if in.FireTime.Equal(fire) {
				took <- struct{}{}
			}
			return nil
		}})
		sctx, cancel := context.WithCancel(ctx)
		go sch.Run(sctx)
		select {
		case <-took:
		case <-time.After(15 * time.Second):
			t.Fatal("frozen run never taken over")
		}
		cancel()
		time.Sleep(300 * time.Millisecond)
		a.Signal(syscall.SIGCONT)
		// A notices: its heartbeat is refused (cancelling its context) or
		// its completion is
		deadline := time.After(15 * time.Second)
		for noticed := false; !noticed; {
			select {
			case l, ok := <-a.Lines:
				if !ok {
					t.Fatal("A exited")
				}
				if strings.Contains(l, "superseded") || strings.Contains(l, "finish refused") || strings.HasPrefix(l, "CANCELLED") {
					noticed = strings.Contains(l, strconv.FormatInt(us, 10)) || strings.Contains(l, fire.Format("15:04:05")) || strings.HasPrefix(l, "CANCELLED")
					t.Logf("A: %s", l)
				}
			case <-deadline:
				t.Fatal("resumed runner never learned it was superseded")
			}
		}
		recs, _ := sch.Runs().List(ctx, "slow", fire, fire.Add(time.Microsecond))
		if len(recs) != 1 || recs[0].Attempt != 2 || recs[0].Owner != "B" || recs[0].Status != jobs.Succeeded {
			t.Fatalf("record %+v", recs)
		}
		var a1 int
		env.DB.QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE owner = 'A' AND attempt = 1 AND fire_time = `+env.DB.Dialect().Placeholder(1), fire).Scan(&a1)
		if a1 != 0 {
			t.Fatal("the superseded runner's effect was written after it was cancelled")
		}
	})
}

// 10,000 items over 2 shards; shard process killed (-9) after 2,000 items
// and retried with the same shard parameters: nothing missed or doubled.
func TestShardedCrashAndRetry(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		dbtest.Exec(t, env.DB, `CREATE TABLE items (id INT PRIMARY KEY)`)
		dbtest.Exec(t, env.DB, `CREATE TABLE delivered (item_id INT PRIMARY KEY)`)
		dbtest.Exec(t, env.DB, `CREATE TABLE sends (item_id INT NOT NULL, shard INT NOT NULL, attempt INT NOT NULL)`)
		for base := 0; base < 10000; base += 1000 {
			var sb strings.Builder
			sb.WriteString("INSERT INTO items (id) VALUES ")
			for i := 1; i <= 1000; i++ {
				if i > 1 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, "(%d)", base+i)
			}
			dbtest.Exec(t, env.DB, sb.String())
		}
		for _, mode := range []string{"unique", "keys"} {
			dbtest.Exec(t, env.DB, `DELETE FROM delivered`)
			dbtest.Exec(t, env.DB, `DELETE FROM sends`)
			// a one-time slot far enough ahead that a helper starting slowly
			// on a loaded machine is running by then (a slot it starts after
			// by more than GRACE is recorded as missed)
			fire := time.Now().Add(6 * time.Second).Truncate(time.Second)
			spec := fmt.Sprintf("%d %d %d %d %d *", fire.UTC().Second(), fire.UTC().Minute(), fire.UTC().Hour(), fire.UTC().Day(), int(fire.UTC().Month()))
			p := dbtest.Spawn(t, "shard", "DSN="+env.DSN, "SPEC="+spec, "RUN_FOR=60s", "GRACE=1s", "MODE="+mode, "CRASH_AFTER=2000", "OWNER=A")
			p.WaitLine(t, "CRASHING", 60*time.Second)
			p.Wait(5 * time.Second)
			before := dbtest.Count(t, env.DB, `SELECT count(*) FROM sends`)
			// retry: another instance with the same job and shard parameters
			hp := dbtest.Spawn(t, "shard", "DSN="+env.DSN, "SPEC="+spec, "RUN_FOR=90s", "GRACE=1s", "MODE="+mode, "OWNER=B")
			deadline := time.Now().Add(90 * time.Second) // on a loaded 2-core machine the keyed mode needs its time
			for dbtest.Count(t, env.DB, `SELECT count(*) FROM sends`) < 10000 && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			hp.Kill()
			total := dbtest.Count(t, env.DB, `SELECT count(*) FROM sends`)
			distinct := dbtest.Count(t, env.DB, `SELECT count(DISTINCT item_id) FROM sends`)
			// sent after the crash: by B's takeover (attempt 2, or more when
			// A, starved on a loaded machine, had already taken its own
			// shard over) or B's claim of a shard A never reached
			retried := total - before
			t.Logf("%s: %d delivered before the crash; after retry %d sends, %d distinct items, %d after the crash", mode, before, total, distinct, retried)
			if total != 10000 || distinct != 10000 || retried == 0 {
				t.Fatalf("%s: sends %d distinct %d retried %d", mode, total, distinct, retried)
			}
		}
	})
}
