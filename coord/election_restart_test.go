package coord_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// The database restarts under two campaigning instances. A
// leader is elected again after it, with a term above every term before
// it, and every committed fenced write carries a term no older than the
// last (MariaDB: the restart starts a new epoch, so the old term cannot
// even be renewed).
func TestElectionSurvivesDatabaseRestart(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.Server.Source != "local" {
			t.Skip("needs a local server to restart")
		}
		ctx := context.Background()
		logDDL(t, env, "restart_log")
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		terms := map[int64]bool{}
		for _, id := range []string{"A", "B"} {
			db := env.Open(t)
			c := coord.New(db)
			e, err := c.Election("restart", coord.ElectionOptions{ID: id, TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.Run(rctx, id, coord.LeaderCallbacks{OnStartedLeading: func(ctx context.Context, l *coord.Leadership) {
					for ctx.Err() == nil {
						if fencedLog(ctx, db, c, "restart_log", "restart-work", l.Term(), 0, id) == nil {
							mu.Lock()
							terms[l.Term()] = true
							mu.Unlock()
						}
						time.Sleep(10 * time.Millisecond)
					}
				}})
			}()
		}
		maxTerm := func() int64 {
			mu.Lock()
			defer mu.Unlock()
			var m int64
			for t := range terms {
				m = max(m, t)
			}
			return m
		}
		deadline := time.Now().Add(20 * time.Second)
		for maxTerm() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		before := maxTerm()
		if before == 0 {
			t.Fatal("nobody elected before the restart")
		}
		if err := env.Server.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		deadline = time.Now().Add(30 * time.Second)
		for maxTerm() <= before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		after := maxTerm()
		stop()
		wg.Wait()
		if after <= before {
			t.Fatalf("no new term wrote within 30 s of the restart (last term %d)", before)
		}
		t.Logf("term %d before the restart, %d writing %v after it", before, after, time.Since(restarted).Round(time.Millisecond))
		rows, err := env.Open(t).QueryContext(ctx, `SELECT token, who FROM restart_log ORDER BY id`) // env.DB's connections died with the server
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var last int64
		owner := map[int64]string{}
		for rows.Next() {
			var term int64
			var who string
			if err := rows.Scan(&term, &who); err != nil {
				t.Fatal(err)
			}
			if term < last {
				t.Fatalf("term %d wrote after term %d", term, last)
			}
			if o, ok := owner[term]; ok && o != who {
				t.Fatalf("term %d written by %s and %s", term, o, who)
			}
			owner[term], last = who, term
		}
	})
}
