package ids_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{
		"segment-drawer":   helperSegmentDrawer,
		"worker-holder":    helperWorkerHolder,
		"frozen-generator": helperFrozenGenerator,
	})
}

// helperWorkerHolder leases the only worker id, issues ids, says so and
// waits to be killed. Its TTL (2 s) leaves room for heartbeats delayed by
// a loaded machine: the test asks whether a live holder's id is handed out
// again, so the holder must not lose it to a late renewal.
func helperWorkerHolder(ctx context.Context, db *sqlcoord.DB) error {
	w, err := ids.LeaseWorker(ctx, db, ids.WorkerOptions{TTL: 2 * time.Second, Margin: 300 * time.Millisecond, MaxWorkers: 1})
	if err != nil {
		return err
	}
	for i := 0; i < 1000; i++ {
		w.Next()
	}
	fmt.Printf("WORKER %d\n", w.ID())
	time.Sleep(time.Hour)
	return nil
}

// helperSegmentDrawer draws N ids per goroutine from tag TAG and prints
// them; it retries through database outages.
func helperSegmentDrawer(ctx context.Context, db *sqlcoord.DB) error {
	n, _ := strconv.Atoi(os.Getenv("N"))
	g, _ := strconv.Atoi(os.Getenv("GOROUTINES"))
	seg, err := ids.NewSegments(db, os.Getenv("TAG"), ids.SegmentOptions{Step: 100, MaxStep: 400, MaxWait: time.Second})
	if err != nil {
		return err
	}
	fmt.Println("READY")
	var mu sync.Mutex
	var outages int
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]string, 0, 500)
			flush := func() {
				mu.Lock()
				fmt.Println("IDS " + strings.Join(batch, ","))
				mu.Unlock()
				batch = batch[:0]
			}
			for i := 0; i < n; {
				id, err := seg.Next(ctx)
				if err != nil {
					mu.Lock()
					outages++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				batch = append(batch, strconv.FormatInt(id, 10))
				if len(batch) == cap(batch) {
					flush()
				}
				i++
			}
			if len(batch) > 0 {
				flush()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("DONE %d %d\n", outages, seg.Fetches())
	return nil
}

func TestSegmentsBasics(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		if _, err := ids.NewSegments(env.DB, "", ids.SegmentOptions{}); !errors.Is(err, ids.ErrInvalid) {
			t.Fatalf("empty tag: %v", err)
		}
		if _, err := ids.NewSegments(env.DB, "x", ids.SegmentOptions{Step: -5}); !errors.Is(err, ids.ErrInvalid) {
			t.Fatalf("negative step: %v", err)
		}
		s, _ := ids.NewSegments(env.DB, "orders", ids.SegmentOptions{Step: 10})
		if _, err := s.Next(ctx); !errors.Is(err, ids.ErrUnknownTag) {
			t.Fatalf("unknown tag: %v", err)
		}
		if err := ids.CreateTag(ctx, env.DB, "orders", 1000); err != nil {
			t.Fatal(err)
		}
		// two allocators (two "processes") interleaved never overlap
		a, _ := ids.NewSegments(env.DB, "orders", ids.SegmentOptions{Step: 10, MaxStep: 10})
		b, _ := ids.NewSegments(env.Open(t), "orders", ids.SegmentOptions{Step: 10, MaxStep: 10})
		seen := map[int64]bool{}
		for i := 0; i < 200; i++ {
			for _, s := range []*ids.Segments{a, b} {
				id, err := s.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if seen[id] || id <= 1000 {
					t.Fatalf("id %d repeated or below the tag's start", id)
				}
				seen[id] = true
			}
		}
		if a.Fetches() < 20 {
			t.Fatalf("only %d fetches for 200 ids with step 10", a.Fetches())
		}
		// dynamic step grows when segments are used fast
		c, _ := ids.NewSegments(env.DB, "fast", ids.SegmentOptions{Step: 10, MaxStep: 1000, Target: time.Hour, AutoCreate: true})
		for i := 0; i < 2000; i++ {
			if _, err := c.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if c.Step() <= 10 {
			t.Fatalf("step did not grow: %d", c.Step())
		}
	})
}

// Two OS processes x 8 goroutines share one tag across many segment
// switches and a database restart in the middle: no id is issued twice,
// and allocation resumes afterwards.
func TestSegmentsAcrossProcessesAndRestart(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.Server.Source != "local" {
			t.Skip("needs a local server to restart")
		}
		ctx := context.Background()
		if err := ids.CreateTag(ctx, env.DB, "shared", 0); err != nil {
			t.Fatal(err)
		}
		const perG, gs, procs = 3000, 8, 2
		var ps []*dbtest.Proc
		for i := 0; i < procs; i++ {
			ps = append(ps, dbtest.Spawn(t, "segment-drawer", "DSN="+env.DSN, "TAG=shared", "N="+strconv.Itoa(perG), "GOROUTINES="+strconv.Itoa(gs)))
		}
		// every process is connected before any draws (and so before the
		// restart below can happen)
		for _, p := range ps {
			p.WaitLine(t, "READY", 20*time.Second)
		}
		seen := make(map[int64]bool, perG*gs*procs)
		total := 0
		restarted := false
		var outages, fetches int64
		for _, p := range ps {
			for line := range p.Lines {
				if strings.HasPrefix(line, "DONE") {
					f := strings.Fields(line)
					o, _ := strconv.ParseInt(f[1], 10, 64)
					fe, _ := strconv.ParseInt(f[2], 10, 64)
					outages, fetches = outages+o, fetches+fe
					break
				}
				if !strings.HasPrefix(line, "IDS ") {
					continue
				}
				for _, s := range strings.Split(line[4:], ",") {
					id, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					if seen[id] {
						t.Fatalf("id %d issued twice", id)
					}
					seen[id] = true
					total++
				}
				if !restarted && total > perG*gs/2 {
					restarted = true
					start := time.Now()
					if err := env.Server.Restart(ctx); err != nil {
						t.Fatal(err)
					}
					t.Logf("restarted %s in %v after %d ids", env.Family, time.Since(start), total)
				}
			}
		}
		if total != perG*gs*procs {
			t.Fatalf("got %d ids, want %d", total, perG*gs*procs)
		}
		if !restarted {
			t.Fatal("the database was never restarted")
		}
		t.Logf("%d unique ids from %d segment fetches; %d Next calls failed during the restart and were retried", total, fetches, outages)
	})
}

func TestWorkerLeasing(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		// concurrent nodes never share a worker id
		const n = 12
		ws := make([]*ids.Worker, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws[i], errs[i] = ids.LeaseWorker(ctx, env.DB, ids.WorkerOptions{TTL: 5 * time.Second})
			}()
		}
		wg.Wait()
		seen := map[int64]bool{}
		for i, w := range ws {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if seen[w.ID()] {
				t.Fatalf("worker id %d leased twice", w.ID())
			}
			seen[w.ID()] = true
		}
		for _, w := range ws {
			w.Close(ctx)
		}
	})
}

func TestWorkerCrashReuseAndClockBehind(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		opt := ids.WorkerOptions{TTL: 300 * time.Millisecond, Margin: 300 * time.Millisecond, MaxWorkers: 1}
		p := dbtest.Spawn(t, "worker-holder", "DSN="+env.DSN)
		p.WaitLine(t, "WORKER 0", 20*time.Second)
		time.Sleep(500 * time.Millisecond) // several heartbeats: the lease is live
		if _, err := ids.LeaseWorker(ctx, env.DB, opt); !errors.Is(err, ids.ErrNoWorkerID) {
			t.Fatalf("live worker id handed out again: %v", err)
		}
		p.Kill()
		killed := time.Now()
		var w *ids.Worker
		for {
			var err error
			w, err = ids.LeaseWorker(ctx, env.DB, opt)
			if err == nil {
				break
			}
			if !errors.Is(err, ids.ErrNoWorkerID) {
				t.Fatal(err)
			}
			if time.Since(killed) > 10*time.Second {
				t.Fatal("crashed node's worker id never reused")
			}
			time.Sleep(20 * time.Millisecond)
		}
		el := time.Since(killed)
		t.Logf("worker id reused %v after kill -9 (holder's TTL 2s + margin %v)", el, opt.Margin)
		if el < opt.Margin {
			t.Fatalf("reused after %v, before the margin %v had passed", el, opt.Margin)
		}
		// issue ids far in the "future", release, and restart with a clock
		// behind them: refused
		for i := 0; i < 10; i++ {
			w.Next()
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		behind := opt
		behind.Clock = func() time.Time { return time.Now().Add(-10 * time.Second) }
		if _, err := ids.LeaseWorker(ctx, env.DB, behind); !errors.Is(err, ids.ErrClockBehind) {
			t.Fatalf("clock 10s behind: %v", err)
		}
		w2, err := ids.LeaseWorker(ctx, env.DB, opt)
		if err != nil {
			t.Fatalf("with a correct clock: %v", err)
		}
		w2.Close(ctx)
	})
}

// A fetch that never reached the server — every connection refused — is
// ErrUnreachable, never "commit outcome unknown": nothing was sent, so
// nothing can have been committed (an operator reading the error during
// a restore must not go looking for a range that was never issued).
func TestFetchThatNeverConnectedIsUnreachable(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		if err := ids.CreateTag(ctx, env.DB, "down", 0); err != nil {
			t.Fatal(err)
		}
		proxy := dbtest.ProxyFor(t, env)
		db, err := sqlcoord.Open(ctx, proxy.Via(env), sqlcoord.Options{MaxOpenConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, _ := ids.NewSegments(db, "down", ids.SegmentOptions{Step: 1, MaxStep: 1})
		if _, err := s.Next(ctx); err != nil {
			t.Fatal(err)
		}
		proxy.SetDown(true) // cuts every connection and refuses new ones
		db.SetMaxIdleConns(0)
		for range 3 {
			_, err = s.Next(ctx)
			if err == nil {
				t.Fatal("a fetch through a proxy that refuses every connection succeeded")
			}
			if errors.Is(err, sqlcoord.ErrCommitUnknown) {
				t.Fatalf("a fetch that never connected: %v, reported as a commit of unknown outcome", err)
			}
		}
		if !errors.Is(err, sqlcoord.ErrUnreachable) && !errors.Is(err, sqlcoord.ErrConnLost) {
			t.Fatalf("%v, want ErrUnreachable", err)
		}
	})
}
