package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

var isoByName = map[string]sql.IsolationLevel{
	"read-committed":  sql.LevelReadCommitted,
	"repeatable-read": sql.LevelRepeatableRead,
	"serializable":    sql.LevelSerializable,
}

// helperRMWWorker: GOROUTINES goroutines (even: Lock with a wait, odd:
// TryLock) each repeat, until RUN_MS ends, one read-modify-write of the
// counter under the lock "rmw" at isolation ISO, logging the value it
// wrote in the same transaction. Every failure but a programming error
// is absorbed: the invariant is checked on what committed.
func helperRMWWorker(ctx context.Context, db *sqlcoord.DB) error {
	iso := isoByName[os.Getenv("ISO")]
	workers, _ := strconv.Atoi(os.Getenv("GOROUTINES"))
	runMS, _ := strconv.Atoi(os.Getenv("RUN_MS"))
	if conns, _ := strconv.Atoi(os.Getenv("CONNS")); conns > 0 {
		db.SetMaxOpenConns(conns)
	}
	c := coord.New(db)
	deadline := time.Now().Add(time.Duration(runMS) * time.Millisecond)
	var wg sync.WaitGroup
	var bad error
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := time.Duration(0)
			if w%2 == 0 {
				wait = 3 * time.Second
			}
			who := fmt.Sprintf("%s/%d", os.Getenv("PROC"), w)
			for time.Now().Before(deadline) {
				err := rmwOnce(ctx, db, c, iso, wait, who)
				if err == nil || errors.Is(err, sqlcoord.ErrLocked) || sqlcoord.Retryable(err) ||
					errors.Is(err, sqlcoord.ErrConnLost) || errors.Is(err, sqlcoord.ErrCommitUnknown) || errors.Is(err, sqlcoord.ErrQueryCanceled) {
					if err != nil {
						time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					}
					continue
				}
				mu.Lock()
				bad = err
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	if bad != nil {
		return bad
	}
	fmt.Println("DONE")
	return nil
}

func rmwOnce(ctx context.Context, db *sqlcoord.DB, c *coord.Client[*sql.Tx], iso sql.IsolationLevel, wait time.Duration, who string) error {
	d := db.Dialect()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	if err != nil {
		return d.Classify(err)
	}
	defer tx.Rollback()
	// a frozen holder (SIGSTOP) loses its session, and the lock, after 1 s
	if err := c.SetIdleTimeout(ctx, tx, time.Second); err != nil {
		return err
	}
	if err := c.Lock(ctx, tx, "rmw", wait); err != nil {
		return err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT n FROM rmw_counter WHERE id = 1`).Scan(&n); err != nil {
		return d.Classify(err)
	}
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
	if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE rmw_counter SET n = ? WHERE id = 1`), n+1); err != nil {
		return d.Classify(err)
	}
	if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO rmw_log (n, who) VALUES (?, ?)`), n+1, who); err != nil {
		return d.Classify(err)
	}
	return d.ClassifyCommit(tx.Commit())
}

// The user's invariant across OS processes — a counter read
// and written back under a lock never loses an update — with waiting and
// NOWAIT holders, pools of 2 and 32 connections, a holder process
// SIGKILLed (and replaced) and another SIGSTOPped past its idle timeout,
// at every isolation level the lock is granted at (PostgreSQL REPEATABLE
// READ and SERIALIZABLE are refused: see the conformance suite).
func TestLockReadModifyWriteAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		levels := []string{"read-committed", "repeatable-read", "serializable"}
		if env.Family == "postgres" {
			levels = levels[:1]
		}
		for _, iso := range levels {
			t.Run(iso, func(t *testing.T) { rmwProcesses(t, env, iso) })
		}
	})
}

func rmwProcesses(t *testing.T, env *dbtest.Env, iso string) {
	ctx := context.Background()
	dbtest.Exec(t, env.DB, `DROP TABLE IF EXISTS rmw_counter`)
	dbtest.Exec(t, env.DB, `DROP TABLE IF EXISTS rmw_log`)
	dbtest.Exec(t, env.DB, `CREATE TABLE rmw_counter (id INT PRIMARY KEY, n BIGINT NOT NULL)`)
	dbtest.Exec(t, env.DB, `INSERT INTO rmw_counter VALUES (1, 0)`)
	// not unique: a lost update shows as two log rows with one value
	dbtest.Exec(t, env.DB, `CREATE TABLE rmw_log (n BIGINT NOT NULL, who VARCHAR(64) NOT NULL)`)
	const runMS = 4000
	spawn := func(i int, ms int) *dbtest.Proc {
		conns := "32"
		if i%2 == 1 {
			conns = "2"
		}
		return dbtest.Spawn(t, "rmw-worker", "DSN="+env.DSN, "ISO="+iso, "GOROUTINES=4", "CONNS="+conns,
			"RUN_MS="+strconv.Itoa(ms), fmt.Sprintf("PROC=p%d", i))
	}
	var ps []*dbtest.Proc
	for i := 0; i < 4; i++ {
		ps = append(ps, spawn(i, runMS))
	}
	time.Sleep(time.Second)
	ps[0].Kill() // SIGKILL, mid-transaction more often than not
	ps = append(ps[1:], spawn(4, runMS-1000))
	time.Sleep(500 * time.Millisecond)
	ps[0].Signal(syscall.SIGSTOP) // frozen past its 1 s idle timeout
	time.Sleep(2500 * time.Millisecond)
	ps[0].Signal(syscall.SIGCONT)
	for _, p := range ps {
		if !p.Wait(60 * time.Second) {
			t.Fatal("a worker did not finish")
		}
		if p.ExitCode() != 0 {
			t.Fatalf("worker exit %d", p.ExitCode())
		}
	}
	var counter int64
	if err := env.DB.QueryRowContext(ctx, `SELECT n FROM rmw_counter WHERE id = 1`).Scan(&counter); err != nil {
		t.Fatal(err)
	}
	logged := int64(dbtest.Count(t, env.DB, `SELECT count(*) FROM rmw_log`))
	distinct := int64(dbtest.Count(t, env.DB, `SELECT count(DISTINCT n) FROM rmw_log`))
	t.Logf("%s: %d committed increments, counter %d", iso, logged, counter)
	if counter != logged || distinct != logged {
		t.Fatalf("%s: %d committed increments left the counter at %d (%d distinct values written): %d lost updates",
			iso, logged, counter, distinct, logged-counter)
	}
	if logged < 20 {
		t.Fatalf("only %d increments committed: the test did not exercise the lock", logged)
	}
}
