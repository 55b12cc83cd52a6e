package coord_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestTryLock(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		a, _ := env.DB.BeginTx(ctx, nil)
		if err := c.TryLock(ctx, a, "orders"); err != nil {
			t.Fatal(err)
		}
		// A second client (its own pool, as another process would have).
		c2 := coord.New(env.Open(t))
		b, _ := env.DB.BeginTx(ctx, nil)
		start := time.Now()
		err := c2.TryLock(ctx, b, "orders")
		el := time.Since(start)
		if !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("second TryLock: %v, want ErrLocked", err)
		}
		if el > time.Second {
			t.Fatalf("NOWAIT took %v", el)
		}
		t.Logf("NOWAIT failure in %v: %v", el, err)
		// The failed attempt did not spoil b (PostgreSQL would abort the
		// transaction after a NOWAIT error): it can still read, take
		// another lock and commit.
		var one int
		if err := b.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("tx unusable after ErrLocked: %v", err)
		}
		if err := c2.TryLock(ctx, b, "orders-other"); err != nil {
			t.Fatalf("second lock in the same tx after ErrLocked: %v", err)
		}
		if err := b.Commit(); err != nil {
			t.Fatalf("commit after ErrLocked: %v", err)
		}
		// other names are independent
		b, _ = env.DB.BeginTx(ctx, nil)
		if err := c2.TryLock(ctx, b, "invoices"); err != nil {
			t.Fatal(err)
		}
		b.Rollback()
		if err := a.Commit(); err != nil {
			t.Fatal(err)
		}
		b, _ = env.DB.BeginTx(ctx, nil)
		if err := c2.TryLock(ctx, b, "orders"); err != nil {
			t.Fatalf("after commit: %v", err)
		}
		b.Rollback()

		// A lock row deleted behind the client's back (CleanupLocks does
		// it on purpose): the name is created (MySQL family) or registered
		// (PostgreSQL) again inside the transaction, and held.
		dbtest.Exec(t, env.DB, env.DB.Rebind("DELETE FROM coord_locks WHERE name = ?"), "orders")
		if env.Family == "postgres" {
			// a name never changes (the console finds held locks by it)
			if _, err := env.DB.ExecContext(ctx, "UPDATE coord_locks SET name = 'x' || name"); err == nil {
				t.Fatal("UPDATE of a lock name accepted")
			}
		}
		b, _ = env.DB.BeginTx(ctx, nil)
		if err := c2.TryLock(ctx, b, "orders"); err != nil {
			t.Fatalf("deleted row: %v, want it recreated and locked", err)
		}
		a, _ = env.DB.BeginTx(ctx, nil)
		if err := c.TryLock(ctx, a, "orders"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("a recreated lock is not held: %v", err)
		}
		a.Rollback()
		b.Rollback()

		// invalid names
		for _, n := range []string{"", string(make([]byte, 256)), "a\x00b", "\xff"} {
			tx, _ := env.DB.BeginTx(ctx, nil)
			if err := c.TryLock(ctx, tx, n); !errors.Is(err, coord.ErrInvalidName) {
				t.Fatalf("name %q: %v", n, err)
			}
			tx.Rollback()
		}
		tx, _ := env.DB.BeginTx(ctx, nil)
		if err := c.Lock(ctx, tx, "x", -time.Second); !errors.Is(err, coord.ErrInvalidTTL) {
			t.Fatalf("negative wait: %v", err)
		}
		tx.Rollback()
	})
}

// First use of a name by many transactions at once: no deadlock, exactly
// one holder at a time.
func TestTryLockFirstUseRace(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		for round := 0; round < 10; round++ {
			name := fmt.Sprintf("fresh-%d", round)
			const n = 12
			errs := make(chan error, n)
			release := make(chan struct{})
			for i := 0; i < n; i++ {
				go func() {
					c := coord.New(env.DB) // separate caches: every one sees a missing row
					tx, err := env.DB.BeginTx(ctx, nil)
					if err != nil {
						errs <- err
						return
					}
					defer tx.Rollback()
					err = c.TryLock(ctx, tx, name)
					errs <- err
					if err == nil {
						<-release
					}
				}()
			}
			got, locked := 0, 0
			for i := 0; i < n; i++ {
				err := <-errs
				switch {
				case err == nil:
					got++
				case errors.Is(err, sqlcoord.ErrLocked):
					locked++
				default:
					t.Fatalf("round %d: unexpected %v", round, err)
				}
			}
			close(release)
			if got != 1 || locked != n-1 {
				t.Fatalf("round %d: %d holders, %d locked", round, got, locked)
			}
		}
	})
}

func TestLockBoundedWait(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		holder, _ := env.DB.BeginTx(ctx, nil)
		if err := c.TryLock(ctx, holder, "job"); err != nil {
			t.Fatal(err)
		}
		wait := 300 * time.Millisecond
		if env.Family == "mysql" {
			wait = time.Second // whole seconds on MySQL/MariaDB
		}
		tx, _ := env.DB.BeginTx(ctx, nil)
		start := time.Now()
		err := c.Lock(ctx, tx, "job", wait)
		el := time.Since(start)
		tx.Rollback()
		if !errors.Is(err, sqlcoord.ErrLockTimeout) {
			t.Fatalf("Lock: %v, want ErrLockTimeout", err)
		}
		if el < wait*8/10 || el > wait+2*time.Second {
			t.Fatalf("timed out after %v for a %v bound", el, wait)
		}
		t.Logf("bounded wait %v returned after %v", wait, el)

		// lock_timeout is restored after a successful bounded wait (PG)
		if env.Family == "postgres" {
			tx, _ := env.DB.BeginTx(ctx, nil)
			if err := c.Lock(ctx, tx, "other", 250*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			var v string
			tx.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v)
			if v != "0" {
				t.Fatalf("lock_timeout left at %q", v)
			}
			tx.Rollback()
		}

		// a waiter gets the lock when the holder commits
		go func() { time.Sleep(200 * time.Millisecond); holder.Commit() }()
		tx, _ = env.DB.BeginTx(ctx, nil)
		if err := c.Lock(ctx, tx, "job", 5*time.Second); err != nil {
			t.Fatalf("waiter: %v", err)
		}

		// context cancellation stops a long wait
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		tx2, _ := env.DB.BeginTx(ctx, nil)
		start = time.Now()
		err = c.Lock(cctx, tx2, "job", 30*time.Second)
		if err == nil || time.Since(start) > 5*time.Second {
			t.Fatalf("cancelled wait: %v after %v", err, time.Since(start))
		}
		tx2.Rollback()
		tx.Rollback()
	})
}

// helperLockHolder locks LOCK in a transaction, prints LOCKED and sleeps
// until killed. With IDLE_MS it bounds its idle-in-transaction time.
func helperLockHolder(ctx context.Context, db *sqlcoord.DB) error {
	c := coord.New(db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if ms, _ := strconv.Atoi(os.Getenv("IDLE_MS")); ms > 0 {
		if err := c.SetIdleTimeout(ctx, tx, time.Duration(ms)*time.Millisecond); err != nil {
			return err
		}
	}
	if err := c.TryLock(ctx, tx, os.Getenv("LOCK")); err != nil {
		return err
	}
	fmt.Println("LOCKED")
	time.Sleep(time.Hour)
	return nil
}

func TestLockHolderKilled(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		p := dbtest.Spawn(t, "lock-holder", "DSN="+env.DSN, "LOCK=nightly")
		p.WaitLine(t, "LOCKED", 20*time.Second)
		tx, _ := env.DB.BeginTx(ctx, nil)
		err := c.TryLock(ctx, tx, "nightly")
		tx.Rollback()
		if !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("lock should be held by the helper: %v", err)
		}
		tx, _ = env.DB.BeginTx(ctx, nil)
		defer func() { tx.Rollback() }()
		got := make(chan error, 1)
		var start time.Time
		go func() {
			start = time.Now()
			got <- c.Lock(ctx, tx, "nightly", 30*time.Second)
		}()
		time.Sleep(300 * time.Millisecond)
		killed := time.Now()
		p.Kill() // SIGKILL
		if err := <-got; err != nil {
			t.Fatalf("waiter after kill -9: %v", err)
		}
		freed := time.Since(killed)
		t.Logf("holder killed with SIGKILL; waiter got the lock %v after the kill (waited %v)", freed, time.Since(start))
		if freed > 5*time.Second {
			t.Fatalf("lock freed %v after kill -9", freed)
		}
	})
}

func TestLockHolderFrozen(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		idle := time.Second // MariaDB's resolution is one second
		p := dbtest.Spawn(t, "lock-holder", "DSN="+env.DSN, "LOCK=frozen", "IDLE_MS="+strconv.Itoa(int(idle.Milliseconds())))
		p.WaitLine(t, "LOCKED", 20*time.Second)
		p.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		tx, _ := env.DB.BeginTx(ctx, nil)
		err := c.TryLock(ctx, tx, "frozen")
		tx.Rollback()
		if !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("a frozen holder should still hold the lock: %v", err)
		}
		tx, _ = env.DB.BeginTx(ctx, nil)
		defer tx.Rollback()
		if err := c.Lock(ctx, tx, "frozen", 15*time.Second); err != nil {
			t.Fatalf("waiter: %v", err)
		}
		el := time.Since(stopped)
		t.Logf("frozen holder (SIGSTOP) lost the lock %v after freezing (idle timeout %v)", el, idle)
		if el < idle/2 || el > idle+6*time.Second {
			t.Fatalf("freed after %v with idle timeout %v", el, idle)
		}
	})
}
