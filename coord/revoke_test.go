package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// leaseLog writes one row in a transaction fenced by FenceLease with l
// (or, with FENCE=token in the environment, by Fence with its token).
func leaseLog(ctx context.Context, db *sqlcoord.DB, c *coord.Client[*sql.Tx], table, resource string, l coord.Lease, slot int, who string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if os.Getenv("FENCE") == "token" {
		err = c.Fence(ctx, tx, resource, l.Token)
	} else {
		err = c.FenceLease(ctx, tx, resource, l)
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO `+table+` (token, slot, who) VALUES (?, ?, ?)`), l.Token, slot, who); err != nil {
		return err
	}
	return tx.Commit()
}

// helperRevocableHolder holds a permit of semaphore "rev" and writes a
// fenced row every 2 ms with it until it learns (at a renewal) that the
// permit is gone, then takes one again.
func helperRevocableHolder(ctx context.Context, db *sqlcoord.DB) error {
	c := coord.New(db)
	s, err := c.Semaphore("rev", 3)
	if err != nil {
		return err
	}
	who := os.Getenv("ID")
	for ctx.Err() == nil {
		p, err := s.Acquire(ctx, who, 3*time.Second)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		k, err := s.KeepAlive(ctx, p, coord.KeepAliveOptions{})
		if err != nil {
			continue
		}
		fmt.Println("HOLDING", p.Slot, p.Token)
		for k.Context().Err() == nil {
			_ = leaseLog(k.Context(), db, c, "rev_log", "rev-work-"+strconv.Itoa(p.Slot), p.Lease, p.Slot, who)
			time.Sleep(2 * time.Millisecond)
		}
		k.Release(context.WithoutCancel(ctx))
	}
	return nil
}

// writesAfter counts the fenced writes of slot with token that commit
// during the second after a revocation returned: none may.
func writesAfter(t *testing.T, env *dbtest.Env, table string, slot int, token int64) int {
	t.Helper()
	q := env.DB.Rebind(`SELECT count(*) FROM ` + table + ` WHERE slot = ? AND token = ?`)
	n := dbtest.Count(t, env.DB, q, slot, token)
	time.Sleep(time.Second)
	return dbtest.Count(t, env.DB, q, slot, token) - n
}

// A revoked permit, a deposed or resigned term and a released lease are
// refused at once: from the moment the call returns, no transaction
// fenced with them (FenceLease) commits — whether or not the resource has
// a new holder (a permit removed by lowering the count never gets one) —
// while their holders keep writing until their next renewal tells them.
func TestRevocationRefusesAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		logDDL(t, env, "rev_log")
		c := coord.New(env.DB)

		t.Run("SetPermits lowering the count, holders in six processes", func(t *testing.T) {
			s, err := c.Semaphore("rev", 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPermits(ctx, 3); err != nil {
				t.Fatal(err)
			}
			var procs []*dbtest.Proc
			for i := range 6 {
				procs = append(procs, dbtest.Spawn(t, "revocable-holder", "DSN="+env.DSN, "ID=h"+strconv.Itoa(i), "FENCE="+os.Getenv("FENCE")))
			}
			defer func() {
				for _, p := range procs {
					p.Kill()
				}
			}()
			deadline := time.Now().Add(20 * time.Second)
			var revoked coord.PermitHolder
			for revoked.Token == 0 {
				hs, err := s.Holders(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hs {
					if h.Slot == 2 && dbtest.Count(t, env.DB, env.DB.Rebind(`SELECT count(*) FROM rev_log WHERE token = ? AND slot = 2`), h.Token) > 0 {
						revoked = h
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("slot 2 was never held and written with")
				}
				time.Sleep(20 * time.Millisecond)
			}
			start := time.Now()
			if err := s.SetPermits(ctx, 2); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: SetPermits(2) returned in %v", env.Family, time.Since(start).Round(time.Millisecond))
			if n := writesAfter(t, env, "rev_log", 2, revoked.Token); n != 0 {
				t.Fatalf("%d writes fenced with the revoked permit (slot 2, token %d) committed after SetPermits returned", n, revoked.Token)
			}
		})

		t.Run("Revoke of a slot", func(t *testing.T) {
			s, _ := c.Semaphore("rev-one", 2)
			p, err := s.TryAcquire(ctx, "holder", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			stop := keepWriting(t, env, c, "rev_log", "rev-one-work", p.Lease)
			defer stop()
			if err := s.Revoke(ctx, p.Slot); err != nil {
				t.Fatal(err)
			}
			if n := writesAfter(t, env, "rev_log", 0, p.Token); n != 0 {
				t.Fatalf("%d writes committed after Revoke returned", n)
			}
		})

		t.Run("Depose of a leader", func(t *testing.T) {
			e, _ := c.Election("rev-depose", coord.ElectionOptions{ID: "leader", TTL: time.Minute})
			l, err := e.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			stop := keepWriting(t, env, c, "rev_log", "rev-depose-work", coord.Lease{Name: l.Lease().Name, Owner: l.Lease().Owner, Token: l.Term()})
			defer stop()
			if _, err := e.Depose(ctx); err != nil {
				t.Fatal(err)
			}
			if n := writesAfter(t, env, "rev_log", 0, l.Term()); n != 0 {
				t.Fatalf("%d writes of the deposed term committed after Depose returned", n)
			}
		})

		t.Run("Release of a lease by another goroutine of its holder", func(t *testing.T) {
			l, err := c.Acquire(ctx, "rev-lease", "holder", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			stop := keepWriting(t, env, c, "rev_log", "rev-lease-work", l)
			defer stop()
			if err := c.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			if n := writesAfter(t, env, "rev_log", 0, l.Token); n != 0 {
				t.Fatalf("%d writes committed after Release returned", n)
			}
		})

		t.Run("Release by a later holder of a lease fenced before", func(t *testing.T) {
			first, err := c.Acquire(ctx, "rev-later", "first", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := leaseLog(ctx, env.DB, c, "rev_log", "rev-later-work", first, 0, "first"); err != nil {
				t.Fatal(err)
			}
			if err := c.Release(ctx, first); err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				l, err := c.Acquire(ctx, "rev-later", "later-"+strconv.Itoa(round), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				stop := keepWriting(t, env, c, "rev_log", "rev-later-work", l)
				if err := c.Release(ctx, l); err != nil {
					stop()
					t.Fatal(err)
				}
				n := writesAfter(t, env, "rev_log", 0, l.Token)
				stop()
				if n != 0 {
					t.Fatalf("holder %d: %d writes committed after Release returned", round, n)
				}
			}
		})

		t.Run("a refused write says the lease is gone", func(t *testing.T) {
			l, err := c.Acquire(ctx, "rev-gone", "holder", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			err = leaseLog(ctx, env.DB, c, "rev_log", "rev-gone-work", l, 0, "late")
			if !errors.Is(err, coord.ErrStaleToken) || !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("FenceLease with a released lease: %v, want ErrStaleToken and ErrLeaseLost", err)
			}
		})
	})
}

// keepWriting writes with l from a goroutine (one fenced row every 2 ms,
// whatever the outcome) until stop.
func keepWriting(t *testing.T, env *dbtest.Env, c *coord.Client[*sql.Tx], table, resource string, l coord.Lease) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wrote := make(chan struct{}, 1)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if leaseLog(ctx, env.DB, c, table, resource, l, 0, "writer") == nil {
				select {
				case wrote <- struct{}{}:
				default:
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("no fenced write went through")
	}
	return func() { cancel(); <-done }
}

// helperFencedLeader campaigns in election "frozen" (TTL 1 s) and, while
// leading, writes rows in fenced transactions (FenceLease, or Fence with
// the term when FENCE=token) that stay open 200 ms after the fence,
// printing "INSIDE <term> <n>" after its write and "COMMITTING <term>
// <n>" before its COMMIT: a process stopped with INSIDE as its last line
// is frozen inside its fenced transaction.
func helperFencedLeader(ctx context.Context, db *sqlcoord.DB) error {
	grace, _ := time.ParseDuration(os.Getenv("FENCE_GRACE")) // "-1ns": never end a blocker
	c := coord.New(db, coord.ClientOptions{FenceGrace: grace})
	id := os.Getenv("ID")
	e, err := c.Election("frozen", coord.ElectionOptions{ID: id, TTL: time.Second})
	if err != nil {
		return err
	}
	n := 0
	return e.Run(ctx, id, coord.LeaderCallbacks{OnStartedLeading: func(ctx context.Context, l *coord.Leadership) {
		for ctx.Err() == nil {
			n++
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				continue
			}
			if os.Getenv("FENCE") == "token" {
				err = c.Fence(ctx, tx, "frozen-work", l.Term())
			} else {
				err = c.FenceLease(ctx, tx, "frozen-work", l.Lease())
			}
			if err == nil {
				_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO frozen_log (token, slot, who) VALUES (?, ?, ?)`), l.Term(), n, id)
			}
			if err != nil {
				tx.Rollback()
				continue
			}
			fmt.Println("INSIDE", l.Term(), n)
			time.Sleep(200 * time.Millisecond)
			fmt.Println("COMMITTING", l.Term(), n)
			if tx.Commit() == nil {
				fmt.Println("COMMITTED", l.Term(), n)
			}
		}
	}})
}

// freezeInside stops p (a fenced-leader helper) inside one of its fenced
// transactions and returns that transaction's term and row and when it
// was frozen. Every line p printed before the stop is read afterwards: a
// process whose last line is INSIDE is in the transaction's open window;
// one stopped elsewhere (committing, or between two transactions) is
// resumed and stopped again at its next INSIDE.
func freezeInside(t *testing.T, p *dbtest.Proc) (term int64, n int, frozen time.Time) {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		last := p.WaitLine(t, "INSIDE", 10*time.Second)
		p.Signal(syscall.SIGSTOP)
		frozen = time.Now()
		for quiet := false; !quiet; {
			select {
			case l, ok := <-p.Lines:
				if !ok {
					t.Fatal("the helper exited")
				}
				last = l
			case <-time.After(300 * time.Millisecond): // stopped: nothing more comes
				quiet = true
			}
		}
		if strings.HasPrefix(last, "INSIDE") { // the last line printed before the stop
			f := strings.Fields(last)
			term, _ = strconv.ParseInt(f[1], 10, 64)
			n, _ = strconv.Atoi(f[2])
			return term, n, frozen
		}
		p.Signal(syscall.SIGCONT)
	}
	t.Fatal("could not stop the helper inside a fenced transaction in 50 tries")
	return 0, 0, time.Time{}
}

// A leader frozen (SIGSTOP) inside its fenced transaction does not block
// its successor past the TTL: the successor's fenced write, waiting for
// the frozen session's lock on the fence's row, has that session ended by
// the database (its transaction idle past the fence grace), and writes
// within TTL + 1 s of the freeze. The frozen transaction rolls back: what
// it wrote never commits, also after the leader is resumed. Before, the
// successor waited until the frozen leader was resumed (> 6 s here) — or,
// for a partitioned one, until TCP gave up on it.
func TestFrozenFencedLeaderDoesNotBlockSuccessor(t *testing.T) {
	t.Parallel()
	for _, fence := range []string{"lease", "token"} {
		t.Run("fenced by "+fence, func(t *testing.T) {
			dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
				logDDL(t, env, "frozen_log")
				a := dbtest.Spawn(t, "fenced-leader", "DSN="+env.DSN, "ID=a", "FENCE="+fence, "FENCE_GRACE="+os.Getenv("FENCE_GRACE"))
				a.WaitLine(t, "INSIDE", 30*time.Second) // leading
				const ttl, grace = time.Second, coord.DefaultFenceGrace
				b := dbtest.Spawn(t, "fenced-leader", "DSN="+env.DSN, "ID=b", "FENCE="+fence, "FENCE_GRACE="+os.Getenv("FENCE_GRACE"))
				defer b.Kill()
				// freeze a inside a fenced transaction, b queued behind it
				deadline := time.Now().Add(20 * time.Second)
				for tickets(t, env, "election:frozen") == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				term, n, frozen := freezeInside(t, a)
				// the successor's first committed write
				q := env.DB.Rebind(`SELECT count(*) FROM frozen_log WHERE token > ?`)
				for dbtest.Count(t, env.DB, q, term) == 0 {
					if time.Since(frozen) > 10*time.Second {
						a.Signal(syscall.SIGCONT)
						t.Fatal("no write by a successor within 10 s of the leader's freeze")
					}
					time.Sleep(5 * time.Millisecond)
				}
				took := time.Since(frozen)
				t.Logf("%s: the successor wrote %v after its predecessor froze inside its fenced transaction (TTL 1 s, fence grace %v)", env.Family, took.Round(time.Millisecond), grace)
				// Liveness: the lease's TTL, then the fence grace, then the
				// session's end; a loaded machine stretches each step, so
				// the bound is a multiple of their sum. Blocked by the
				// frozen leader, no successor writes at all (see above).
				if bound := 4 * (ttl + grace); took > bound {
					t.Errorf("the successor wrote %v after the freeze, want within %v (4 × (TTL + fence grace))", took, bound)
				}
				a.Signal(syscall.SIGCONT)
				time.Sleep(time.Second)
				if got := dbtest.Count(t, env.DB, env.DB.Rebind(`SELECT count(*) FROM frozen_log WHERE token = ? AND slot = ? AND who = 'a'`), term, n); got != 0 {
					t.Errorf("the frozen transaction's write (term %d, row %d) committed", term, n)
				}
			})
		})
	}
}
