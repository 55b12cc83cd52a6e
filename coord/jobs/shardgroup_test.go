package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A sharded job takes its shard total from the live members of a
// group at the slot's fire time, fixed once per slot; each shard of a slot
// is claimed exactly once, by two schedulers.
func TestShardTotalFromMembership(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		join := func(id string) *membership.Membership {
			m, err := membership.Join(ctx, env.DB, "mailers", membership.Options{ID: id, TTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Leave(context.Background()) })
			return m
		}
		for _, id := range []string{"m1", "m2", "m3"} {
			join(id)
		}
		runs := jobs.NewRuns(env.DB)
		fire1 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

		t.Run("fixed once per slot", func(t *testing.T) {
			var wg sync.WaitGroup
			got := make(chan int, 8)
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := runs.SlotTotal(ctx, "digest", fire1, "mailers")
					if err != nil {
						t.Error(err)
					}
					got <- n
				}()
			}
			wg.Wait()
			close(got)
			for n := range got {
				if n != 3 {
					t.Fatalf("slot total %d, want 3 (the live members)", n)
				}
			}
			join("m4") // membership changes mid-slot
			if n, _ := runs.SlotTotal(ctx, "digest", fire1, "mailers"); n != 3 {
				t.Fatalf("same slot after a join: %d, want the recorded 3", n)
			}
			if n, _ := runs.SlotTotal(ctx, "digest", fire1.Add(time.Hour), "mailers"); n != 4 {
				t.Fatalf("next slot: %d, want 4", n)
			}
			if n, _ := runs.SlotTotal(ctx, "digest", fire1, "nobody"); n != 3 {
				t.Fatalf("a recorded slot ignores a later group: %d", n)
			}
			if n, _ := runs.SlotTotal(ctx, "digest", fire1.Add(2*time.Hour), "empty-group"); n != 1 {
				t.Fatalf("empty group: %d, want 1 shard", n)
			}
		})

		t.Run("two schedulers claim each shard of a slot once", func(t *testing.T) {
			var mu sync.Mutex
			type runKey struct {
				fire         time.Time
				shard, total int
			}
			seen := map[runKey]int{}
			job := jobs.Job{Name: "broadcast", Schedule: "* * * * * *", ShardGroup: "mailers", Grace: 5 * time.Second,
				Run: func(ctx context.Context, in jobs.Info) error {
					mu.Lock()
					seen[runKey{in.FireTime.UTC(), in.Shard, in.ShardTotal}]++
					mu.Unlock()
					return nil
				}}
			sctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for _, owner := range []string{"A", "B"} {
				s := jobs.NewScheduler(env.DB, jobs.Options{Owner: owner, Tick: 20 * time.Millisecond})
				if err := s.Register(job); err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() { defer wg.Done(); s.Run(sctx) }()
			}
			// Run until two slots are complete (not a fixed sleep: under load
			// the slot in progress when the schedulers stop is cut short,
			// which says nothing about the claim).
			complete := func() (newest time.Time, n int) {
				mu.Lock()
				defer mu.Unlock()
				slots := map[time.Time]int{}
				for k := range seen {
					slots[k.fire]++
				}
				for fire, c := range slots {
					if c == 4 {
						n++
						if fire.After(newest) {
							newest = fire
						}
					}
				}
				return newest, n
			}
			deadline := time.Now().Add(30 * time.Second)
			for _, n := complete(); n < 2 && time.Now().Before(deadline); _, n = complete() {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			newest, ncomplete := complete()
			if ncomplete < 2 {
				t.Errorf("only %d complete slots in 30 s", ncomplete)
			}
			mu.Lock()
			defer mu.Unlock()
			slots := map[time.Time]int{}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("%+v ran %d times", k, n)
				}
				if k.total != 4 {
					t.Errorf("%+v: total %d, want the 4 live members", k, k.total)
				}
				slots[k.fire]++
			}
			if len(slots) < 2 {
				t.Fatalf("only %d slots ran: %v", len(slots), seen)
			}
			for fire, n := range slots {
				// Every slot up to the newest complete one has all its shards;
				// later ones may have been stopped mid-slot.
				if n != 4 && !fire.After(newest) {
					t.Errorf("slot %s ran %d shards, want 4", fire, n)
				}
			}
		})
	})
}

// Shards spread across members — each member's scheduler claims
// the shard of its rank first, even when another instance reaches the
// slot first (its clock runs ahead); a shard without a live scheduler
// (a member that runs none) is claimed by someone after the spread delay.
// The spread is a head start (SpreadDelay less the clock skew), not a
// reservation: a member stalled longer than that (a loaded machine) loses
// its shard to another, as it should, so the test wants most shards and
// at least one whole slot on their members, and every shard once.
func TestShardsSpreadAcrossMembers(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		for _, id := range []string{"m1", "m2", "m3", "m4"} { // m4 runs no scheduler
			m, err := membership.Join(ctx, env.DB, "spread", membership.Options{ID: id, TTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Leave(context.Background())
		}
		var mu sync.Mutex
		type runKey struct {
			fire  time.Time
			shard int
		}
		owner := map[runKey][]string{}
		sctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, id := range []string{"m1", "m2", "m3"} {
			clock := time.Now
			if id == "m3" {
				clock = func() time.Time { return time.Now().Add(600 * time.Millisecond) } // always first to a slot
			}
			s := jobs.NewScheduler(env.DB, jobs.Options{Owner: id, MemberID: id, Tick: 20 * time.Millisecond, Clock: clock, SpreadDelay: 2 * time.Second}) // a head start of 1.4 s
			err := s.Register(jobs.Job{Name: "spread", Schedule: "* * * * * *", ShardGroup: "spread", Grace: 5 * time.Second,
				Run: func(ctx context.Context, in jobs.Info) error {
					mu.Lock()
					k := runKey{in.FireTime.UTC(), in.Shard}
					owner[k] = append(owner[k], id)
					mu.Unlock()
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.Run(sctx) }()
		}
		time.Sleep(7 * time.Second)
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		slots := map[time.Time]int{}
		judged, moved := 0, 0
		slotMoved := map[time.Time]bool{}
		var first time.Time // the slot the schedulers started in: not every one saw it
		for k := range owner {
			if first.IsZero() || k.fire.Before(first) {
				first = k.fire
			}
		}
		for k, os := range owner {
			if len(os) != 1 {
				t.Errorf("%v shard %d ran %d times (%v)", k.fire, k.shard, len(os), os)
			}
			if k.fire.After(first) && k.shard < 3 {
				judged++
				if want := []string{"m1", "m2", "m3"}[k.shard]; os[0] != want {
					moved++
					slotMoved[k.fire] = true
					t.Logf("%v shard %d ran on %s, not %s (which was more than its head start late)", k.fire, k.shard, os[0], want)
				}
			}
			slots[k.fire]++
		}
		complete, onRank := 0, 0
		for fire, n := range slots {
			if n == 4 {
				complete++
				if fire.After(first) && !slotMoved[fire] {
					onRank++
				}
			}
		}
		if complete < 2 {
			t.Fatalf("only %d complete slots of 4 shards: %v", complete, owner)
		}
		if moved*2 > judged || onRank == 0 {
			t.Errorf("%d of %d shards ran on another member than their rank's, %d whole slots on their members: the spread does not hold", moved, judged, onRank)
		}
	})
}

// Three processes run a 6-shard job without MemberID (ShardConcurrency
// default 1): the slot's shards spread over the processes, each shard
// once. (Before ShardConcurrency, the first process to reach the slot
// claimed all six.)
func TestShardsSpreadWithoutMembership(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		dbtest.Exec(t, env.DB, `CREATE TABLE spread (fire_time `+timeCol(env)+` NOT NULL, shard INT NOT NULL, owner VARCHAR(40) NOT NULL)`)
		fire := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
		for i := 0; i < 3; i++ {
			p := dbtest.Spawn(t, "spread", "DSN="+env.DSN, "SPEC="+fmt.Sprintf("%d %d %d * * *", fire.Second(), fire.Minute(), fire.Hour()),
				"RUN_FOR=8s", "GRACE=5s", fmt.Sprintf("OWNER=p%d", i))
			go func() {
				for range p.Lines {
				}
			}()
		}
		deadline := time.Now().Add(30 * time.Second)
		for dbtest.Count(t, env.DB, `SELECT count(*) FROM spread`) < 6 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM spread`); n != 6 {
			t.Fatalf("%d shard runs, want 6", n)
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(DISTINCT shard) FROM spread`); n != 6 {
			t.Fatalf("%d distinct shards ran, want 6 (a shard ran twice)", n)
		}
		owners := dbtest.Count(t, env.DB, `SELECT count(DISTINCT owner) FROM spread`)
		most := dbtest.Count(t, env.DB, `SELECT MAX(n) FROM (SELECT count(*) AS n FROM spread GROUP BY owner) x`)
		t.Logf("6 shards ran on %d processes, at most %d on one", owners, most)
		if owners < 2 || most > 4 {
			t.Fatalf("6 shards ran on %d processes, %d on one: not spread", owners, most)
		}
	})
}
