package main

import (
	"bufio"
	"context"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/coord/ids"
)

func init() {
	register(scenario{name: "ids", title: "snowflake 8 x 500,000; two processes on one segment tag", run: demoIDs})
}

// newDrawSegmentCmd is the helper process of the segment demonstration.
func newDrawSegmentCmd() *cobra.Command {
	var tag string
	var n int
	cmd := &cobra.Command{
		Use: "__draw-segment", Hidden: true, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			seg, err := ids.NewSegments(db, tag, ids.SegmentOptions{Step: 1000, AutoCreate: true})
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			for i := 0; i < n; i++ {
				id, err := seg.Next(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintln(w, id)
			}
			fmt.Fprintf(w, "FETCHES %d\n", seg.Fetches())
			return nil
		},
	}
	cmd.Flags().StringVar(&tag, "tag", "", "segment tag")
	cmd.Flags().IntVar(&n, "n", 0, "ids to draw")
	return cmd
}

// naiveSnowflake is the article's broken variant: when the sequence runs
// out within a millisecond it wraps around instead of waiting.
type naiveSnowflake struct {
	mu     sync.Mutex
	lastMs int64
	seq    int64
}

func (s *naiveSnowflake) next() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Since(ids.DefaultLayout.Epoch).Milliseconds()
	if now == s.lastMs {
		s.seq = (s.seq + 1) & 4095 // no wait for the next millisecond
	} else {
		s.seq = 0
	}
	s.lastMs = now
	return now<<22 | 1<<12 | s.seq
}

func demoIDs(ctx context.Context, e *demoEnv) error {
	const g, n = 8, 500_000
	run := func(next func() (int64, error)) (dups int, increasing bool, el time.Duration, err error) {
		out := make([][]int64, g)
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		start := time.Now()
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := make([]int64, n)
				for j := range s {
					id, err := next()
					if err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					s[j] = id
				}
				out[i] = s
			}()
		}
		wg.Wait()
		el = time.Since(start)
		if firstErr != nil {
			return 0, false, el, firstErr
		}
		increasing = true
		all := make([]int64, 0, g*n)
		for _, s := range out {
			for j := 1; j < len(s); j++ {
				if s[j] <= s[j-1] {
					increasing = false
				}
			}
			all = append(all, s...)
		}
		slices.Sort(all)
		for i := 1; i < len(all); i++ {
			if all[i] == all[i-1] {
				dups++
			}
		}
		return dups, increasing, el, nil
	}
	w, err := ids.LeaseWorker(ctx, e.DB, ids.WorkerOptions{TTL: 10 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close(context.Background())
	e.printf("1. snowflake, worker id %d leased from coord_id_workers: %d goroutines x %d ids\n", w.ID(), g, n)
	dups, inc, el, err := run(w.Next)
	if err != nil {
		return err
	}
	e.printf("   %d ids in %v: %d duplicates, increasing per goroutine: %v\n", g*n, el.Round(time.Millisecond), dups, inc)
	naive := &naiveSnowflake{}
	dups, _, el, _ = run(func() (int64, error) { return naive.next(), nil })
	e.printf("   without \"wait for the next millisecond\": %d ids in %v: %d duplicates\n", g*n, el.Round(time.Millisecond), dups)

	e.printf("2. two processes draw 50,000 ids each from segment tag \"orders\" (step 1000)\n")
	if e.Self == "" {
		return fmt.Errorf("cannot find this executable")
	}
	var mu sync.Mutex
	var all []int64
	var fetches []string
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := demoChild(ctx, e.Self, core.ConnString(e.DB), "__draw-segment", "--tag", "orders", "--n", "50000")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			out, err := cmd.Output()
			if err != nil {
				errs <- fmt.Errorf("helper: %w", err)
				return
			}
			var mine []int64
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.HasPrefix(l, "FETCHES") {
					mu.Lock()
					fetches = append(fetches, strings.TrimPrefix(l, "FETCHES "))
					mu.Unlock()
					continue
				}
				id, err := strconv.ParseInt(l, 10, 64)
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, id)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	slices.Sort(all)
	overlap := 0
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			overlap++
		}
	}
	e.printf("   %d ids, %d issued twice; segment fetches per process: %s\n", len(all), overlap, strings.Join(fetches, ", "))
	return nil
}
