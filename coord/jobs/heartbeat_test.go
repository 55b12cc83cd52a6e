package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A run whose heartbeats fail (database unreachable) has its
// context cancelled once no heartbeat succeeded for Grace — from then on
// another instance may take the run over — instead of running on.
func TestRunContextEndsWhenHeartbeatsFail(t *testing.T) {
	t.Parallel()
	const grace = 600 * time.Millisecond
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		proxy, via := dbtest.OpenVia(t, env)
		started := make(chan time.Time, 1)
		ended := make(chan error, 1)
		s := jobs.NewScheduler(via, jobs.Options{Tick: 10 * time.Millisecond})
		err := s.Register(jobs.Job{Name: "hb", Schedule: "* * * * * *", Grace: grace, Run: func(ctx context.Context, in jobs.Info) error {
			select {
			case started <- time.Now():
			default:
				return nil // only the first run matters
			}
			<-ctx.Done()
			ended <- context.Cause(ctx)
			return ctx.Err()
		}})
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go s.Run(sctx)
		var at time.Time
		select {
		case at = <-started:
		case <-ctx.Done():
			t.Fatal("the job never ran")
		}
		proxy.SetDown(true)
		select {
		case cause := <-ended:
			after := time.Since(at)
			t.Logf("run context ended %v after the run started (grace %v): %v", after.Round(time.Millisecond), grace, cause)
			if after > grace+200*time.Millisecond {
				t.Errorf("ended %v after start, grace %v", after, grace)
			}
			if !errors.Is(cause, jobs.ErrSuperseded) {
				t.Errorf("cause %v, want ErrSuperseded (the run may be taken over)", cause)
			}
		case <-time.After(3 * grace):
			t.Fatalf("the run's context was still live %v after its heartbeats started failing", 3*grace)
		}
		proxy.SetDown(false)
	})
}
