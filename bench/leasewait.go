package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// LeaseWaitConfig sizes the lease hand-off benchmark.
type LeaseWaitConfig struct {
	Waiters  []int         // waiters besides the holder, per case
	Handoffs int           // hand-offs measured per case
	Hold     time.Duration // how long each holder keeps the lease
	Poll     time.Duration // the polling baseline's interval
}

// LeaseWaitRow is one case: how soon after a Release the next contender
// holds the lease, and how many acquire statements each hand-off cost.
type LeaseWaitRow struct {
	Dialect         string        `json:"dialect"`
	Mode            string        `json:"mode"`
	Waiters         int           `json:"waiters"`
	Handoffs        int           `json:"handoffs"`
	P50             time.Duration `json:"p50_ns"`
	P99             time.Duration `json:"p99_ns"`
	AcquiresPerHand float64       `json:"acquire_statements_per_handoff"`
}

type acquireCount struct {
	metrics.Nop
	n atomic.Int64
}

func (a *acquireCount) Call(op, _, _ string, _ time.Duration) {
	if op == "lease.acquire" {
		a.n.Add(1)
	}
}

// LeaseWait measures hand-off latency (Release → the next holder's
// Acquire returned) with AcquireWait and with a polling loop (Acquire,
// sleep Poll, again), each contender going back into line after its turn.
func LeaseWait(ctx context.Context, db *sqlcoord.DB, cfg LeaseWaitConfig) ([]LeaseWaitRow, error) {
	if cfg.Handoffs <= 0 || cfg.Poll <= 0 || len(cfg.Waiters) == 0 {
		return nil, fmt.Errorf("bench: lease wait: handoffs, poll and waiters must be positive")
	}
	var out []LeaseWaitRow
	for _, w := range cfg.Waiters {
		for _, mode := range []string{"AcquireWait", fmt.Sprintf("poll every %v", cfg.Poll)} {
			r, err := leaseWaitCase(ctx, db, cfg, w, mode)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func leaseWaitCase(ctx context.Context, db *sqlcoord.DB, cfg LeaseWaitConfig, waiters int, mode string) (LeaseWaitRow, error) {
	cnt := &acquireCount{}
	cdb, err := sqlcoord.Open(ctx, core.ConnString(db), sqlcoord.Options{Metrics: cnt, MaxOpenConns: 2*waiters + 8, MaxIdleConns: 2*waiters + 8})
	if err != nil {
		return LeaseWaitRow{}, err
	}
	defer cdb.Close()
	c := coord.New(cdb)
	name := fmt.Sprintf("bench-lease-%d-%d", waiters, time.Now().UnixNano())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var released atomic.Int64 // UnixNano of the last Release, 0: none yet
	var holds atomic.Int64    // acquisitions so far
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for i := 0; i < waiters+1; i++ { // the holder and its waiters
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", i)
			for cctx.Err() == nil {
				var l coord.Lease
				var err error
				if mode == "AcquireWait" {
					l, err = c.AcquireWait(cctx, name, owner, time.Minute)
				} else {
					for {
						l, err = c.Acquire(cctx, name, owner, time.Minute)
						if !errors.Is(err, coord.ErrLeaseHeld) {
							break
						}
						t := time.NewTimer(cfg.Poll)
						select {
						case <-cctx.Done():
						case <-t.C:
						}
						t.Stop()
						if cctx.Err() != nil {
							break
						}
					}
				}
				if cctx.Err() != nil {
					return
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				got := time.Now()
				holds.Add(1)
				if r := released.Load(); r != 0 {
					mu.Lock()
					lat = append(lat, got.Sub(time.Unix(0, r)))
					if len(lat) >= cfg.Handoffs {
						cancel()
					}
					mu.Unlock()
				}
				time.Sleep(cfg.Hold)
				mine := holds.Load()
				released.Store(time.Now().UnixNano())
				if err := c.Release(context.WithoutCancel(cctx), l); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					cancel()
					return
				}
				// a hand-off: back in line only once another contender
				// holds it (the releaser would otherwise win at once)
				for holds.Load() == mine && cctx.Err() == nil && waiters > 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return LeaseWaitRow{}, firstErr
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	row := LeaseWaitRow{Dialect: db.Dialect().Name(), Mode: mode, Waiters: waiters, Handoffs: len(lat)}
	if n := len(lat); n > 0 {
		row.P50, row.P99 = lat[n/2], lat[min(n-1, n*99/100)]
		row.AcquiresPerHand = float64(cnt.n.Load()) / float64(n+1)
	}
	return row, nil
}

// LeaseWaitMarkdown is the report's table.
func LeaseWaitMarkdown(rs []LeaseWaitRow) string {
	var b strings.Builder
	b.WriteString("| dialect | waiters | mode | hand-offs | p50 after Release | p99 | acquire statements per hand-off |\n|---|---:|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %v | %v | %.1f |\n", r.Dialect, r.Waiters, r.Mode, r.Handoffs, r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.AcquiresPerHand)
	}
	return b.String()
}
