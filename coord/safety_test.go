package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

const (
	safetyLease    = "safety-lease"
	safetyResource = "safety-counter"
)

// helperLeaseWorker: GOROUTINES goroutines contend for one lease with a
// short TTL for RUN_MS; each holder pauses at random, sometimes longer than
// the TTL, then does a fenced increment of the counter and logs (token,
// worker, counter value). Prints "RESULT accepted rejected held ended":
// ended counts the fenced transactions whose session the database ended
// (a successor's fence reaps a transaction idle past FenceGrace — on a
// loaded machine a goroutine descheduled inside it; its writes roll back
// or, at a commit, may have landed: the counter and the log say which).
func helperLeaseWorker(ctx context.Context, db *sqlcoord.DB) error {
	ttl, _ := time.ParseDuration(os.Getenv("TTL"))
	runMS, _ := strconv.Atoi(os.Getenv("RUN_MS"))
	workers, _ := strconv.Atoi(os.Getenv("GOROUTINES"))
	proc := os.Getenv("PROC")
	c := coord.New(db)
	deadline := time.Now().Add(time.Duration(runMS) * time.Millisecond)
	var accepted, rejected, held, ended atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("%s/%d", proc, w)
			for time.Now().Before(deadline) {
				l, err := c.Acquire(ctx, safetyLease, "", ttl)
				if errors.Is(err, coord.ErrLeaseHeld) {
					held.Add(1)
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
					continue
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				// the "GC pause": 30% of holders outlive their lease
				pause := time.Duration(rand.Int64N(int64(ttl / 4)))
				if rand.IntN(10) < 3 {
					pause = ttl + time.Duration(rand.Int64N(int64(ttl)))
				}
				time.Sleep(pause)
				err = fencedIncrement(ctx, db, c, l.Token, worker)
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, coord.ErrStaleToken):
					rejected.Add(1)
				case errors.Is(err, sqlcoord.ErrConnLost):
					ended.Add(1)
				case sqlcoord.Retryable(err):
				default:
					firstErr.CompareAndSwap(nil, err)
					return
				}
				c.Release(ctx, l) // ErrLeaseLost is expected after long pauses
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return e.(error)
	}
	fmt.Printf("RESULT %d %d %d %d\n", accepted.Load(), rejected.Load(), held.Load(), ended.Load())
	return nil
}

func fencedIncrement(ctx context.Context, db *sqlcoord.DB, c *coord.Client[*sql.Tx], token int64, worker string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := c.Fence(ctx, tx, safetyResource, token); err != nil {
		return err
	}
	ph := func(n int) string { return db.Dialect().Placeholder(n) }
	if _, err := tx.ExecContext(ctx, `UPDATE safety_counter SET n = n + 1 WHERE id = 1`); err != nil {
		return db.Dialect().Classify(err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT n FROM safety_counter WHERE id = 1`).Scan(&n); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO safety_log (n, token, worker) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, n, token, worker); err != nil {
		return db.Dialect().Classify(err)
	}
	return db.Dialect().ClassifyCommit(tx.Commit())
}

// Lease safety under real concurrency: 3 OS processes x 8 goroutines.
func TestLeaseSafetyAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE safety_counter (id INT PRIMARY KEY, n BIGINT NOT NULL)`)
		dbtest.Exec(t, env.DB, `INSERT INTO safety_counter VALUES (1, 0)`)
		// n is unique: the counter value each accepted write produced.
		dbtest.Exec(t, env.DB, `CREATE TABLE safety_log (n BIGINT PRIMARY KEY, token BIGINT NOT NULL, worker VARCHAR(64) NOT NULL)`)
		const procs = 3
		var ps []*dbtest.Proc
		for i := 0; i < procs; i++ {
			ps = append(ps, dbtest.Spawn(t, "lease-worker", "DSN="+env.DSN, "TTL=150ms", "RUN_MS=4000",
				"GOROUTINES=8", fmt.Sprintf("PROC=p%d", i)))
		}
		var accepted, rejected, held, ended int64
		for _, p := range ps {
			line := p.WaitLine(t, "RESULT", 60*time.Second)
			f := strings.Fields(line)
			a, _ := strconv.ParseInt(f[1], 10, 64)
			r, _ := strconv.ParseInt(f[2], 10, 64)
			h, _ := strconv.ParseInt(f[3], 10, 64)
			e, _ := strconv.ParseInt(f[4], 10, 64)
			accepted, rejected, held, ended = accepted+a, rejected+r, held+h, ended+e
			if !p.Wait(10*time.Second) || p.ExitCode() != 0 {
				t.Fatalf("worker exit %d", p.ExitCode())
			}
		}
		t.Logf("accepted %d fenced writes, rejected %d stale ones, %d acquire attempts found the lease held, %d transactions ended by a successor's fence", accepted, rejected, held, ended)

		var counter, logged int64
		env.DB.QueryRowContext(ctx, `SELECT n FROM safety_counter WHERE id = 1`).Scan(&counter)
		env.DB.QueryRowContext(ctx, `SELECT count(*) FROM safety_log`).Scan(&logged)
		// a transaction ended at its commit may have committed
		if logged != counter || counter < accepted || counter > accepted+ended {
			t.Fatalf("counter %d, log rows %d, accepted writes %d (%d ended, outcome unknown)", counter, logged, accepted, ended)
		}
		if rejected == 0 {
			t.Fatal("no stale write was attempted: the test did not exercise fencing")
		}
		if accepted < 10 {
			t.Fatalf("only %d accepted writes", accepted)
		}
		rows, err := env.DB.QueryContext(ctx, `SELECT n, token FROM safety_log ORDER BY n`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var prevTok, want int64 = 0, 1
		for rows.Next() {
			var n, tok int64
			rows.Scan(&n, &tok)
			if n != want {
				t.Fatalf("counter values not consecutive: got %d want %d", n, want)
			}
			if tok < prevTok {
				t.Fatalf("write %d with token %d accepted after token %d", n, tok, prevTok)
			}
			prevTok, want = tok, want+1
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	})
}
