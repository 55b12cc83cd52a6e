package jobs_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMissedSlotPolicies(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		runs := jobs.NewRuns(env.DB)
		base := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
		now := base.Add(5*time.Minute + 30*time.Second) // slots 10:01..10:05 were missed
		for _, tc := range []struct {
			name   string
			policy jobs.Missed
			max    int
			want   []string
		}{
			{"skip", jobs.SkipMissed, 0, nil},
			{"latest", jobs.RunLatest, 0, []string{"10:05"}},
			{"catchup", jobs.CatchUp, 3, []string{"10:03", "10:04", "10:05"}},
		} {
			job := "missed-" + tc.name
			r, err := runs.Claim(ctx, job, base, 0, 1, "old")
			if err != nil {
				t.Fatal(err)
			}
			runs.Finish(ctx, r, nil)
			var mu sync.Mutex
			var ran []string
			s := jobs.NewScheduler(env.DB, jobs.Options{Tick: 10 * time.Millisecond, Clock: func() time.Time { return now }})
			s.Register(jobs.Job{Name: job, Schedule: "* * * * *", Missed: tc.policy, CatchUpMax: tc.max,
				Run: func(ctx context.Context, in jobs.Info) error {
					mu.Lock()
					ran = append(ran, in.FireTime.Format("15:04"))
					mu.Unlock()
					return nil
				}})
			// run until the five missed slots are all decided (run or
			// recorded skipped) — a fixed 300 ms saw only 3 under CI's
			// load — then a moment more, in which nothing else may run
			sctx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() { defer close(stopped); s.Run(sctx) }()
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				recs, err := runs.List(ctx, job, base.Add(time.Second), now)
				if err != nil {
					t.Fatal(err)
				}
				decided := 0
				for _, r := range recs {
					if r.Status == jobs.Skipped || r.Status == jobs.Succeeded {
						decided++
					}
				}
				if decided >= 5 {
					break
				}
			}
			time.Sleep(300 * time.Millisecond)
			cancel()
			<-stopped
			sort.Strings(ran)
			if len(ran) != len(tc.want) {
				t.Fatalf("%s: ran %v, want %v", tc.name, ran, tc.want)
			}
			for i := range ran {
				if ran[i] != tc.want[i] {
					t.Fatalf("%s: ran %v, want %v", tc.name, ran, tc.want)
				}
			}
			// every slot not run is recorded skipped, with the reason
			recs, err := runs.List(ctx, job, base.Add(time.Second), now)
			if err != nil {
				t.Fatal(err)
			}
			skipped := 0
			for _, r := range recs {
				if r.Status == jobs.Skipped {
					skipped++
					if !strings.HasPrefix(r.Reason, "missed: no scheduler was running") {
						t.Errorf("%s: skipped %v with reason %q", tc.name, r.FireTime, r.Reason)
					}
				}
			}
			if skipped+len(tc.want) != 5 {
				t.Fatalf("%s: %d slots recorded skipped and %d run, want 5 in all: %+v", tc.name, skipped, len(tc.want), recs)
			}
		}
	})
}

func TestOverlapSkipAndTimeout(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		release := make(chan struct{})
		started := make(chan time.Time, 10)
		s := jobs.NewScheduler(env.DB, jobs.Options{Tick: 10 * time.Millisecond})
		s.Register(jobs.Job{Name: "overlap", Schedule: "* * * * * *", Overlap: jobs.SkipOverlap, Grace: 3 * time.Second,
			Run: func(ctx context.Context, in jobs.Info) error {
				started <- in.FireTime
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}})
		s.Register(jobs.Job{Name: "timeout", Schedule: "* * * * * *", Timeout: 100 * time.Millisecond,
			Run: func(ctx context.Context, in jobs.Info) error {
				<-ctx.Done()
				return ctx.Err()
			}})
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Run(sctx); close(done) }()
		first := <-started
		time.Sleep(2500 * time.Millisecond) // two more slots while the first still runs
		close(release)
		cancel()
		<-done
		recs, err := s.Runs().List(ctx, "overlap", first, first.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		skipped := 0
		for _, r := range recs {
			if r.Status == jobs.Skipped {
				skipped++
			}
		}
		if skipped < 1 || recs[0].Status != jobs.Succeeded {
			t.Fatalf("overlap records %+v", recs)
		}
		trecs, _ := s.Runs().List(ctx, "timeout", first.Add(-time.Hour), first.Add(time.Hour))
		failed := 0
		for _, r := range trecs {
			if r.Status == jobs.Failed && r.Error != "" {
				failed++
			}
		}
		if failed == 0 {
			t.Fatalf("timeout records %+v", trecs)
		}
	})
}

// Overlap Queue, two schedulers on the same job (every second, each run
// 1.5 s): slots wait as 'queued' and run one after the other in fire
// order, never two at once, whichever instance starts them.
func TestOverlapQueue(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		type span struct {
			fire, start, end time.Time
			owner            string
		}
		var mu sync.Mutex
		var spans []span
		job := func(owner string) jobs.Job {
			return jobs.Job{Name: "queue", Schedule: "* * * * * *", Overlap: jobs.Queue, Grace: 2 * time.Second,
				Run: func(ctx context.Context, in jobs.Info) error {
					sp := span{fire: in.FireTime, start: time.Now(), owner: owner}
					select {
					case <-time.After(1500 * time.Millisecond):
					case <-ctx.Done():
						return ctx.Err()
					}
					sp.end = time.Now()
					mu.Lock()
					spans = append(spans, sp)
					mu.Unlock()
					return nil
				}}
		}
		sctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, owner := range []string{"A", "B"} {
			s := jobs.NewScheduler(env.DB, jobs.Options{Owner: owner, Tick: 10 * time.Millisecond})
			if err := s.Register(job(owner)); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.Run(sctx) }()
		}
		time.Sleep(6500 * time.Millisecond)
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		if len(spans) < 3 {
			t.Fatalf("only %d runs finished", len(spans))
		}
		for i := 1; i < len(spans); i++ {
			if spans[i].start.Before(spans[i-1].end) {
				t.Fatalf("slot %v (%s) started before slot %v (%s) ended", spans[i].fire, spans[i].owner, spans[i-1].fire, spans[i-1].owner)
			}
			if !spans[i].fire.After(spans[i-1].fire) {
				t.Fatalf("slot %v ran after slot %v: not in fire order", spans[i].fire, spans[i-1].fire)
			}
		}
		recs, err := jobs.NewRuns(env.DB).List(ctx, "queue", spans[0].fire, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		queued := 0
		for _, r := range recs {
			if r.Status == jobs.Queued && strings.Contains(r.Reason, "Overlap: Queue") {
				queued++
			}
		}
		owners := map[string]bool{}
		for _, sp := range spans {
			owners[sp.owner] = true
		}
		if queued == 0 {
			t.Fatalf("no slot waiting as queued at the end: %+v", recs)
		}
		t.Logf("%d runs one after another (instances %v), %d slots still queued", len(spans), owners, queued)
	})
}

// Overlap Queue across two scheduler processes (a job every second, each
// run 1.5 s, so slots queue up; timed by the database clock): no run starts before the
// previous one ended, whichever process runs them, and in fire order.
func TestOverlapQueueAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE spans (fire_time `+timeCol(env)+` NOT NULL, owner VARCHAR(40) NOT NULL, started_at `+timeCol(env)+` NOT NULL, ended_at `+timeCol(env)+` NULL)`)
		var ps []*dbtest.Proc
		for i := 0; i < 2; i++ {
			p := dbtest.Spawn(t, "queue", "DSN="+env.DSN, "SPEC=*/1 * * * * *", "RUN_FOR=8s", "GRACE=3s", fmt.Sprintf("OWNER=q%d", i))
			go func() {
				for range p.Lines {
				}
			}()
			ps = append(ps, p)
		}
		for _, p := range ps {
			p.Wait(30 * time.Second)
		}
		rows, err := env.DB.QueryContext(ctx, `SELECT fire_time, owner, started_at, ended_at FROM spans WHERE ended_at IS NOT NULL ORDER BY started_at`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		type span struct {
			fire, start, end time.Time
			owner            string
		}
		var spans []span
		for rows.Next() {
			var sp span
			if err := rows.Scan(&sp.fire, &sp.owner, &sp.start, &sp.end); err != nil {
				t.Fatal(err)
			}
			spans = append(spans, sp)
		}
		owners := map[string]bool{}
		for i, sp := range spans {
			owners[sp.owner] = true
			if i == 0 {
				continue
			}
			if sp.start.Before(spans[i-1].end) {
				t.Fatalf("slot %v (%s) started at %v, before slot %v (%s) ended at %v", sp.fire, sp.owner, sp.start, spans[i-1].fire, spans[i-1].owner, spans[i-1].end)
			}
			if !sp.fire.After(spans[i-1].fire) {
				t.Fatalf("slot %v ran after slot %v: not in fire order", sp.fire, spans[i-1].fire)
			}
		}
		if len(spans) < 3 {
			t.Fatalf("only %d runs ended", len(spans))
		}
		t.Logf("%d runs one after another, by %d process(es)", len(spans), len(owners))
	})
}
