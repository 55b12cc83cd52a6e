package jobs_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
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
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			s.Run(sctx)
			cancel()
			sort.Strings(ran)
			if len(ran) != len(tc.want) {
				t.Fatalf("%s: ran %v, want %v", tc.name, ran, tc.want)
			}
			for i := range ran {
				if ran[i] != tc.want[i] {
					t.Fatalf("%s: ran %v, want %v", tc.name, ran, tc.want)
				}
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
