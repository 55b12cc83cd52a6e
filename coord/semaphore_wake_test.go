package coord_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// helperQueuedWaiter waits for a permit of semaphore "handoff" (2
// permits), printing GRANTED once it has one, then holds it.
func helperQueuedWaiter(ctx context.Context, db *sqlcoord.DB) error {
	s, err := coord.New(db).Semaphore("handoff", 2)
	if err != nil {
		return err
	}
	fmt.Println("WAITING")
	if _, err := s.Acquire(ctx, "w1", time.Minute); err != nil {
		return err
	}
	fmt.Println("GRANTED")
	<-ctx.Done()
	return nil
}

// TestSemaphoreTwoReleasesWakeTwoWaiters: both permits of a semaphore are
// released while the first of two waiters is frozen, so both releases
// wake that head; once it resumes and takes a permit, the second waiter
// gets the other at once, not at its next safety read (5 s on
// PostgreSQL) with a permit free meanwhile.
func TestSemaphoreTwoReleasesWakeTwoWaiters(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		s, err := coord.New(env.DB).Semaphore("handoff", 2)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Acquire(ctx, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Acquire(ctx, "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		tickets := func() int {
			var n int
			env.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM coord_tickets WHERE queue = 'semaphore:handoff'`).Scan(&n)
			return n
		}
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		w1 := dbtest.Spawn(t, "queued-waiter", "DSN="+env.DSN)
		w1.WaitLine(t, "WAITING", 30*time.Second)
		waitFor("the first waiter's ticket", func() bool { return tickets() == 1 })
		s2, err := coord.New(env.Open(t)).Semaphore("handoff", 2)
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan time.Time, 1)
		go func() {
			if _, err := s2.Acquire(ctx, "w2", time.Minute); err == nil {
				granted <- time.Now()
			}
		}()
		waitFor("the second waiter's ticket", func() bool { return tickets() == 2 })
		w1.Signal(syscall.SIGSTOP)
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // both wake-ups are waiting for the frozen head
		w1.Signal(syscall.SIGCONT)
		w1.WaitLine(t, "GRANTED", 30*time.Second)
		first := time.Now()
		select {
		case at := <-granted:
			t.Logf("%s: the second waiter got the other permit %v after the first", env.Family, at.Sub(first).Round(time.Millisecond))
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: the second waiter still waits 3 s after the first took one of two free permits", env.Family)
		}
	})
}
