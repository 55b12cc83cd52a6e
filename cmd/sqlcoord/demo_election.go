package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "election", title: "one leader among three instances, a deposed leader's late write refused by the row; at most 2 of 5 workers at once", run: demoElection})
}

// demoElection: three instances campaign; the leader writes with its term
// as fencing token; an operator deposes it while it "pauses"; the next
// leader takes over with a larger term and the old leader's late write is
// refused by the fence. Then five workers share a 2-permit semaphore.
func demoElection(ctx context.Context, e *demoEnv) error {
	name := fmt.Sprintf("demo-leader-%d", time.Now().UnixNano())
	c := coord.New(e.DB)
	write := func(term int64) error {
		return txn.Do(ctx, e.DB, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
			return c.Fence(ctx, tx, name, term)
		})
	}
	cands := map[string]*coord.Election[*sql.Tx]{}
	for _, id := range []string{"A", "B", "C"} {
		el, err := c.Election(name, coord.ElectionOptions{ID: id, TTL: time.Second})
		if err != nil {
			return err
		}
		cands[id] = el
	}
	first, err := cands["A"].Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		return err
	}
	if err := write(first.Term()); err != nil {
		return err
	}
	e.printf("   A elected, term %d, proclaims 10.0.0.1:8080; B and C campaign (queued in the database)\n", first.Term())
	won := make(chan *coord.Leadership, 2)
	cctx, stopCampaigns := context.WithCancel(ctx)
	defer stopCampaigns()
	for _, id := range []string{"B", "C"} {
		go func() {
			if l, err := cands[id].Campaign(cctx, "10.0.0.2:8080 ("+id+")"); err == nil {
				won <- l
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	// A pauses (a GC pause, a frozen VM) and an operator deposes it
	if _, err := cands["A"].Depose(ctx); err != nil {
		return err
	}
	deposed := time.Now()
	next := <-won
	e.printf("   A paused; operator runs `sqlcoord leader resign`; %s elected %v later with term %d\n",
		next.Leader().ID, time.Since(deposed).Round(time.Millisecond), next.Term())
	if err := write(next.Term()); err != nil {
		return err
	}
	err = write(first.Term())
	switch {
	case errors.Is(err, coord.ErrStaleToken):
		e.printf("   A wakes and writes with term %d: refused by the row (ErrStaleToken) ✓\n", first.Term())
	case err == nil:
		return errors.New("the deposed leader's write was accepted")
	default:
		return err
	}
	if cur, err := cands["A"].Leader(ctx); err == nil {
		e.printf("   followers read: leader %s, term %d, value %q\n", cur.ID, cur.Term, cur.Value)
	}
	next.Resign(ctx)
	stopCampaigns()
	select {
	case l := <-won: // the third candidate won meanwhile
		l.Resign(ctx)
	case <-time.After(100 * time.Millisecond):
	}

	sem, err := c.Semaphore(name, 2)
	if err != nil {
		return err
	}
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	for w := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sem.Acquire(ctx, fmt.Sprintf("worker-%d", w), 5*time.Second)
			if err != nil {
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(150 * time.Millisecond)
			inside.Add(-1)
			sem.Release(ctx, p)
		}()
	}
	wg.Wait()
	e.printf("   5 workers through a 2-permit semaphore: at most %d at once ✓\n", most.Load())
	return nil
}
