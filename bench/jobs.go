package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
)

// Jobs measures slot claims per second with 2, 8 and 32 competing
// instances (every instance tries every slot; one wins each) and the
// latency from a slot's planned fire time to its start with two
// schedulers.
func Jobs(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	s := &suite{db: db, cfg: cfg, group: "jobs"}
	runs := jobs.NewRuns(db)
	base := time.Now().UTC().Truncate(time.Second)
	for _, n := range []int{2, 8, 32} {
		poolSize(db, n+4)
		job := fmt.Sprintf("bench-claim-%d-%d", n, time.Now().UnixNano())
		next := make([]int64, n)
		var won atomic.Int64
		r := Measure(ctx, n, cfg.Duration, func(ctx context.Context, w int) error {
			slot := base.Add(time.Duration(next[w]) * time.Second)
			next[w]++
			_, err := runs.Claim(ctx, job, slot, 0, 1, fmt.Sprint(w))
			if err == nil {
				won.Add(1)
				return nil
			}
			if err == jobs.ErrAlreadyClaimed {
				return nil
			}
			return err
		})
		r.Dialect, r.Group, r.Case = db.Dialect().Name(), s.group, fmt.Sprintf("slots claimed/s (%d instances; p50/p99 per attempt)", n)
		r.OpsPerS = float64(won.Load()) / r.Elapsed.Seconds()
		r.Ops = won.Load()
		s.out = append(s.out, r)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "  %-8s %-44s %9.0f slots/s p50 %v\n", r.Dialect, r.Case, r.OpsPerS, r.P50.Round(time.Microsecond))
		}
	}
	// fire-to-start latency
	var mu sync.Mutex
	var lat []time.Duration
	job := fmt.Sprintf("bench-latency-%d", time.Now().UnixNano())
	dur := max(cfg.Duration, 3*time.Second)
	sctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		sch := jobs.NewScheduler(db, jobs.Options{Tick: 10 * time.Millisecond})
		sch.Register(jobs.Job{Name: job, Schedule: "* * * * * *", Run: func(ctx context.Context, in jobs.Info) error {
			d := time.Since(in.FireTime)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
			return nil
		}})
		wg.Add(1)
		go func() { defer wg.Done(); sch.Run(sctx) }()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := Result{Dialect: db.Dialect().Name(), Group: s.group, Case: "planned fire time → start (2 schedulers, tick 10ms)", Clients: 2, Ops: int64(len(lat)), Elapsed: dur}
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
		r.OpsPerS = float64(len(lat)) / dur.Seconds()
	}
	s.out = append(s.out, r)
	return s.out, nil
}
