package sqlcoordtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
)

// isolationLevels are the levels every dialect × stack is checked at.
var isolationLevels = []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable}

// readModifyWrite is the user's invariant, not the mechanism: goroutines
// of the stack under test and of an independent pool read a counter under
// a lock, add one and write it back; the counter must equal the number of
// committed increments. Waiting holders (Lock) and NOWAIT holders
// (TryLock) contend, each round on a name never used before (so its first
// use races), at every isolation level. Where the database takes the
// transaction's snapshot with the lock statement itself (PostgreSQL
// REPEATABLE READ and SERIALIZABLE) the lock must be refused with
// ErrLockIsolation rather than granted without protecting the reads.
func (s *suite[TTx]) readModifyWrite(t *testing.T) {
	for _, iso := range isolationLevels {
		t.Run(iso.String(), func(t *testing.T) { s.rmw(t, iso) })
	}
}

func (s *suite[TTx]) rmw(t *testing.T, iso sql.IsolationLevel) {
	ctx := s.ctx(t)
	key := s.name("rmw-" + strings.ReplaceAll(strings.ToLower(iso.String()), " ", ""))
	if refused := s.rmwRefused(t, ctx, iso, key); refused {
		return
	}
	const rounds, per = 3, 4
	drvWorkers := max(s.Workers, 2)
	const otherWorkers = 2
	var committed [rounds]atomic.Int64
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for r := 0; r < rounds; r++ {
		id := fmt.Sprintf("%s-%d", key, r)
		if _, err := s.Other.Executor().Exec(ctx, s.Other.Rebind(`INSERT INTO `+s.table+` (id, body, fence) VALUES (?, 'rmw', 0)`), id); err != nil {
			t.Fatal(err)
		}
		name := id + "-lock" // never used before this round: its first use races
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < drvWorkers+otherWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				wait := time.Duration(0) // TryLock
				if w%2 == 0 {
					wait = 20 * time.Second // Lock with a wait
				}
				for i := 0; i < per; {
					var err error
					if w < drvWorkers {
						err = increment(ctx, s.Driver, s.c, iso, name, s.table, id, wait)
					} else {
						err = increment(ctx, s.Other, s.oc, iso, name, s.table, id, wait)
					}
					switch {
					case err == nil:
						committed[r].Add(1)
						i++
					case errors.Is(err, errBusy):
						time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					case s.Pooler && errors.Is(err, sqlcoord.ErrQueryCanceled):
						// a stray cancel behind the pooler: not an increment
					default:
						fail(fmt.Errorf("worker %d (wait %v): %w", w, wait, err))
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		var n int64
		if err := s.Other.Executor().QueryRow(ctx, s.Other.Rebind(`SELECT fence FROM `+s.table+` WHERE id = ?`), id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if c := committed[r].Load(); n != c {
			t.Errorf("round %d: counter %d after %d committed increments under the lock: %d lost updates", r, n, c, c-n)
		}
	}
	for i, err := range errs {
		if i == 5 {
			t.Errorf("… %d errors in all", len(errs))
			break
		}
		t.Errorf("%v", err)
	}
}

// rmwRefused checks the lock at iso: granted (false), or refused with
// ErrLockIsolation (true) — allowed only where the snapshot is taken
// before the lock can be granted (PostgreSQL REPEATABLE READ and
// SERIALIZABLE), and then the transaction must stay usable.
func (s *suite[TTx]) rmwRefused(t *testing.T, ctx context.Context, iso sql.IsolationLevel, key string) bool {
	tx, err := s.Driver.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Driver.RollbackTx(ctx, tx)
	for _, wait := range []time.Duration{0, time.Second} {
		err := s.c.Lock(ctx, tx, key+"-probe", wait)
		snapshotFirst := s.Driver.Dialect().Family() == "postgres" && iso >= sql.LevelRepeatableRead
		switch {
		case err == nil && snapshotFirst:
			t.Fatalf("Lock (wait %v) granted at %v on PostgreSQL: its snapshot predates the lock, so the lock cannot protect the reads; want ErrLockIsolation", wait, iso)
		case err == nil:
			continue
		case errors.Is(err, coord.ErrLockIsolation) && snapshotFirst:
			if !strings.Contains(err.Error(), "READ COMMITTED") {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
			var one int
			if err := s.Driver.TxExecutor(tx).QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				t.Fatalf("transaction unusable after the refusal: %v", err)
			}
		default:
			t.Fatalf("Lock (wait %v) at %v: %v", wait, iso, err)
		}
	}
	return s.Driver.Dialect().Family() == "postgres" && iso >= sql.LevelRepeatableRead
}

var errBusy = errors.New("lock busy")

// increment is one read-modify-write of the counter row id under the lock
// name, in a transaction of drv at iso; errBusy when TryLock found the
// lock held (the transaction is rolled back, nothing counted).
func increment[TTx any](ctx context.Context, drv sqlcoord.Driver[TTx], c *coord.Client[TTx], iso sql.IsolationLevel, name, table, id string, wait time.Duration) error {
	tx, err := drv.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	if err != nil {
		return err
	}
	defer drv.RollbackTx(ctx, tx)
	if err := c.Lock(ctx, tx, name, wait); err != nil {
		if errors.Is(err, sqlcoord.ErrLocked) {
			return errBusy
		}
		return fmt.Errorf("lock: %w", err)
	}
	x := drv.TxExecutor(tx)
	ph := drv.Dialect().Placeholder
	var n int64
	if err := x.QueryRow(ctx, `SELECT fence FROM `+table+` WHERE id = `+ph(1), id).Scan(&n); err != nil {
		return fmt.Errorf("read under the lock: %w", drv.Dialect().Classify(err))
	}
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) // widen the window a stale read would need
	if _, err := x.Exec(ctx, `UPDATE `+table+` SET fence = `+ph(1)+` WHERE id = `+ph(2), n+1, id); err != nil {
		return fmt.Errorf("write under the lock: %w", drv.Dialect().Classify(err))
	}
	if err := drv.CommitTx(ctx, tx); err != nil {
		return fmt.Errorf("commit: %w", drv.Dialect().ClassifyCommit(err))
	}
	return nil
}
