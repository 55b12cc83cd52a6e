package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sort"
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

// openTransactions counts this database's sessions (but the caller's)
// that hold something open: PostgreSQL, a session idle in a transaction
// or one whose statement has run for over a second holding a snapshot
// or a transaction id (a waiting lock statement); MariaDB, an InnoDB
// transaction of a session that is idle or has run for a second.
func openTransactions(t *testing.T, env *dbtest.Env) int {
	t.Helper()
	if env.Family == "postgres" {
		return dbtest.Count(t, env.DB, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (state LIKE 'idle in transaction%' OR (state = 'active' AND query_start < clock_timestamp() - interval '1 second'
    AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)))`)
	}
	return dbtest.Count(t, env.DB, `SELECT count(*) FROM information_schema.INNODB_TRX x JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND (p.COMMAND = 'Sleep' OR p.TIME >= 1)`)
}

// tickets counts the waits queued in queue.
func tickets(t *testing.T, env *dbtest.Env, queue string) int {
	return dbtest.Count(t, env.DB, env.DB.Rebind(`SELECT count(*) FROM coord_tickets WHERE queue = ?`), queue)
}

// Followers waiting in Campaign, a lease waiter in AcquireWait and a
// permit waiter in Semaphore.Acquire hold nothing open on the server: no
// session of the database sits in a transaction or keeps a snapshot, and
// VACUUM removes every dead row of a table updated meanwhile (PostgreSQL).
// Before migration 25 each waiter kept a transaction open on the queue's
// lock, and VACUUM left all 60,000 dead rows.
func TestWaitingHoldsNothingOpen(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		holder := coord.New(env.DB)
		e, err := holder.Election("vacuum", coord.ElectionOptions{ID: "leader", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ld, err := e.Campaign(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		defer ld.Resign(context.Background())
		if _, err := holder.Acquire(ctx, "vacuum-lease", "holder", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		sem, _ := holder.Semaphore("vacuum-sem", 1)
		if _, err := sem.TryAcquire(ctx, "holder", 30*time.Second); err != nil {
			t.Fatal(err)
		}

		wdb := env.Open(t)
		w := coord.New(wdb)
		var wg sync.WaitGroup
		for _, id := range []string{"f1", "f2"} {
			f, err := w.Election("vacuum", coord.ElectionOptions{ID: id, TTL: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); f.Campaign(ctx, id) }()
		}
		wg.Add(2)
		go func() { defer wg.Done(); w.AcquireWait(ctx, "vacuum-lease", "waiter", time.Minute) }()
		wsem, _ := w.Semaphore("vacuum-sem", 1)
		go func() { defer wg.Done(); wsem.Acquire(ctx, "waiter", time.Minute) }()
		defer wg.Wait()
		defer cancel()
		deadline := time.Now().Add(20 * time.Second)
		for tickets(t, env, "election:vacuum")+tickets(t, env, "vacuum-lease")+tickets(t, env, "semaphore:vacuum-sem") < 4 {
			if time.Now().After(deadline) {
				t.Fatal("the four waits did not queue")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond) // past the one-second bound below

		t.Run("no session holds a transaction or a snapshot", func(t *testing.T) {
			for range 10 {
				if n := openTransactions(t, env); n != 0 {
					t.Fatalf("%d sessions hold a transaction or a snapshot while the waiters wait", n)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		if env.Family != "postgres" {
			return
		}
		t.Run("VACUUM removes every dead row while they wait", func(t *testing.T) {
			dbtest.Exec(t, env.DB, `CREATE TABLE vacuumed (id int PRIMARY KEY, v int NOT NULL)`)
			dbtest.Exec(t, env.DB, `INSERT INTO vacuumed SELECT g, 0 FROM generate_series(1, 20000) g`)
			for range 3 {
				dbtest.Exec(t, env.DB, `UPDATE vacuumed SET v = v + 1`)
			}
			dbtest.Exec(t, env.DB, `VACUUM vacuumed`)
			// Counted in the table itself (pgstattuple), not in the
			// statistics: the UPDATEs' backend reports its dead rows up to
			// a second later, after the VACUUM had reported none.
			dbtest.Exec(t, env.DB, `CREATE EXTENSION IF NOT EXISTS pgstattuple`)
			dead := dbtest.Count(t, env.DB, `SELECT dead_tuple_count FROM pgstattuple('vacuumed')`)
			if dead != 0 {
				t.Fatalf("VACUUM left %d of 60000 dead rows while the waiters wait", dead)
			}
		})
	})
}

// One process waiting in 100 elections costs the server at most two
// connections besides its pool's, and a few statements a second — not
// per wait: at most 5/s on PostgreSQL and 25/s on MariaDB (the issue's
// bounds), counted by a proxy in front of the waiting process.
func TestIdleWaitingCost(t *testing.T) {
	t.Parallel()
	const n = 100
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		holder := coord.New(env.DB)
		opt := coord.ElectionOptions{TTL: 10 * time.Second}
		for i := range n {
			e, err := holder.Election(fmt.Sprintf("cost-%d", i), opt)
			if err != nil {
				t.Fatal(err)
			}
			l, err := e.Campaign(ctx, "holder")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Resign(context.Background())
		}
		proxy := dbtest.ProxyFor(t, env)
		wdb, err := sqlcoord.Open(ctx, proxy.Via(env), sqlcoord.Options{MaxOpenConns: 8, MaxIdleConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer wdb.Close()
		w := coord.New(wdb)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		// a campaign that won (the holder's renewal was late on a loaded
		// machine) waits no more: it counts as done queueing
		var won atomic.Int64
		for i := range n {
			e, err := w.Election(fmt.Sprintf("cost-%d", i), opt)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.Campaign(ctx, "follower"); err == nil {
					won.Add(1)
				}
			}()
		}
		deadline := time.Now().Add(3 * opt.TTL)
		for queued := 0; queued+int(won.Load()) < n; queued = dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_tickets`) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d waits queued in %v (%d campaigns won)", queued, n, 3*opt.TTL, won.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if w := won.Load(); w > 0 {
			t.Logf("%d campaigns won: the holder's leases expired", w)
		}
		time.Sleep(time.Second)
		before, start := proxy.Statements(), time.Now()
		time.Sleep(6 * time.Second)
		rate := float64(proxy.Statements()-before) / time.Since(start).Seconds()
		conns, pool := proxy.Conns(), wdb.Stats().OpenConnections
		t.Logf("%s: %d waits: %.1f statements/s, %d server connections (%d in the pool)", env.Family, n, rate, conns, pool)
		limit := 5.0
		if env.Family != "postgres" {
			limit = 25
		}
		t.Run("statements per second do not grow with the waits", func(t *testing.T) {
			if rate > limit {
				t.Errorf("%.1f statements/s while %d campaigns wait, want at most %v", rate, n, limit)
			}
		})
		t.Run("at most two connections besides the pool", func(t *testing.T) {
			if conns-pool > 2 {
				t.Errorf("%d server connections, %d of them the pool's", conns, pool)
			}
		})
	})
}

// Waiters are served in the order they queued, and a holder that releases
// and tries again at once — Acquire, TryAcquire — does not get past them:
// it queues behind (goroutines of one Client and of several Clients).
func TestWaitersServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		holder := coord.New(env.DB)
		t.Run("lease", func(t *testing.T) {
			l, err := holder.Acquire(ctx, "fifo", "holder", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			cs := []*coord.Client[*sql.Tx]{coord.New(env.DB), coord.New(env.Open(t)), coord.New(env.Open(t))}
			var (
				mu     sync.Mutex
				served []string
				barged []string
				wg     sync.WaitGroup
			)
			for i := range 9 {
				c := cs[i%len(cs)]
				id := fmt.Sprintf("w%d", i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := c.AcquireWait(ctx, "fifo", id, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					served = append(served, id)
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					if err := c.Release(ctx, got); err != nil {
						t.Error(err)
					}
					// at once again: a success while a waiter is still
					// not served is a grant past the queue (every waiter
					// served before has released: the lease was free)
					if again, err := c.Acquire(ctx, "fifo", id, time.Minute); err == nil {
						mu.Lock()
						if len(served) < 9 {
							barged = append(barged, id)
						}
						mu.Unlock()
						c.Release(ctx, again)
					}
				}()
				waitQueued(t, env, "fifo", i+1)
			}
			if err := holder.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			// the head may have it already, or it is still promised to it
			_, err = holder.Acquire(ctx, "fifo", "holder", time.Minute)
			var held *coord.LeaseHeldError
			if !errors.As(err, &held) || (!held.Queued && held.Holder == "holder") {
				t.Errorf("Acquire right after Release with 9 waiters queued: %v, want a LeaseHeldError", err)
			}
			wg.Wait()
			want := []string{"w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8"}
			if strings.Join(served, " ") != strings.Join(want, " ") {
				t.Errorf("served %v, want %v", served, want)
			}
			// a waiter that acquires again finds the queue empty only once
			// every waiter was served (a loaded machine may delay it that long)
			if len(barged) > 0 {
				t.Errorf("acquired again past the queue: %v", barged)
			}
		})
		t.Run("semaphore", func(t *testing.T) {
			s, _ := holder.Semaphore("fifo", 2)
			a, err := s.TryAcquire(ctx, "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.TryAcquire(ctx, "b", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu     sync.Mutex
				served []string
				wg     sync.WaitGroup
			)
			for i := range 6 {
				id := fmt.Sprintf("w%d", i)
				ws, _ := coord.New(env.Open(t)).Semaphore("fifo", 2)
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, err := ws.Acquire(ctx, id, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					served = append(served, id)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					ws.Release(ctx, p)
				}()
				waitQueued(t, env, "semaphore:fifo", i+1)
			}
			s.Release(ctx, a)
			if _, err := s.TryAcquire(ctx, "a", time.Minute); !errors.Is(err, coord.ErrSemaphoreFull) {
				t.Errorf("TryAcquire right after a release with 6 waiters queued: %v, want ErrSemaphoreFull", err)
			}
			s.Release(ctx, b)
			wg.Wait()
			// two permits: the order of grants may swap neighbours that
			// were granted within one release of each other, never more
			for i, id := range served {
				n, _ := strconv.Atoi(id[1:])
				if n < i-1 || n > i+1 {
					t.Fatalf("served %v: %s out of its place", served, id)
				}
			}
		})
	})
}

// helperCyclingWorker takes a permit of semaphore "cycle" (2 permits),
// holds it 20 ms, releases it and at once takes it again, for DURATION.
// For every grant it prints "CYCLE <ticket> <granted µs> <waited µs> <seen
// µs>": the number of the ticket it queued with (0: it got a permit
// without queueing), read from coord_tickets while it waits, the
// database's time of the grant (the permit's expiry less its TTL), and the
// database's time when another connection first saw the ticket (by then
// its insert had committed: the ticket had arrived) — the database's own
// order of arrivals and grants, which a loaded machine cannot blur.
func helperCyclingWorker(ctx context.Context, db *sqlcoord.DB) error {
	c := coord.New(db)
	s, err := c.Semaphore("cycle", 2)
	if err != nil {
		return err
	}
	d, _ := time.ParseDuration(os.Getenv("DURATION"))
	end := time.Now().Add(d)
	id := os.Getenv("ID")
	const ttl = 10 * time.Second
	now := "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"
	if db.Dialect().Family() == "postgres" {
		now = "CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)"
	}
	q := db.Rebind(`SELECT seq, ` + now + ` FROM coord_tickets WHERE queue = 'semaphore:cycle' AND owner = ?`)
	for time.Now().Before(end) {
		type grant struct {
			p   coord.Permit
			err error
		}
		got := make(chan grant, 1)
		asked := time.Now()
		go func() {
			p, err := s.Acquire(ctx, id, ttl)
			got <- grant{p, err}
		}()
		var ticket, seen int64
		var g grant
	wait:
		for {
			select {
			case g = <-got:
				break wait
			default:
			}
			if ticket == 0 {
				db.QueryRowContext(ctx, q, id).Scan(&ticket, &seen)
			}
			time.Sleep(time.Millisecond)
		}
		if g.err != nil {
			return g.err
		}
		fmt.Println("CYCLE", ticket, g.p.ExpiresAt.Add(-ttl).UnixMicro(), time.Since(asked).Microseconds(), seen)
		time.Sleep(20 * time.Millisecond)
		if err := s.Release(ctx, g.p); err != nil {
			return err
		}
	}
	fmt.Println("DONE")
	return nil
}

// Four processes cycle through a semaphore of two permits, each taking a
// permit again right after releasing it: permits go in ticket order (a
// grant to a later ticket while an earlier one still waits is counted),
// and no wait is long. A ticket waits from when its insert committed, not
// from when it drew its number: two tickets taken at once may commit in
// either order, and until the earlier number commits the later one is the
// head. So a grant counts against an earlier ticket only once that ticket
// had been seen from another connection. Before migration 25 a releaser that re-acquired at
// once beat the queue's head: hundreds of grants out of order in 4 s and
// waits of half a second.
func TestSemaphoreFairAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		var ps []*dbtest.Proc
		for i := range 4 {
			ps = append(ps, dbtest.Spawn(t, "cycling-worker", "DSN="+env.DSN, "ID=p"+strconv.Itoa(i), "DURATION=4s"))
		}
		type grant struct{ ticket, granted, waited, seen int64 }
		var gs []grant
		for _, p := range ps {
			for {
				line := p.WaitLine(t, "", 60*time.Second)
				if line == "DONE" {
					break
				}
				f := strings.Fields(line)
				if len(f) == 5 && f[0] == "CYCLE" {
					var g grant
					g.ticket, _ = strconv.ParseInt(f[1], 10, 64)
					g.granted, _ = strconv.ParseInt(f[2], 10, 64)
					g.waited, _ = strconv.ParseInt(f[3], 10, 64)
					g.seen, _ = strconv.ParseInt(f[4], 10, 64)
					gs = append(gs, g)
				}
			}
		}
		violations, unarrived, queued, longest := 0, 0, 0, int64(0)
		for _, a := range gs {
			longest = max(longest, a.waited)
			if a.ticket == 0 {
				continue
			}
			queued++
			for _, b := range gs {
				if b.ticket > a.ticket && b.granted < a.granted {
					if b.granted > a.seen {
						violations++
					} else {
						unarrived++
					}
				}
			}
		}
		sort.Slice(gs, func(i, j int) bool { return gs[i].waited < gs[j].waited })
		t.Logf("%s: %d grants (%d after queueing), longest wait %v, p99 %v, %d out of ticket order, %d before the earlier ticket was seen", env.Family, len(gs), queued,
			time.Duration(longest)*time.Microsecond, time.Duration(gs[len(gs)*99/100].waited)*time.Microsecond, violations, unarrived)
		if violations > 0 {
			t.Errorf("%d grants to a later ticket while an earlier one waited", violations)
		}
		if queued == 0 {
			t.Error("nobody queued: the test measured nothing")
		}
		if longest > 5_000_000 {
			t.Errorf("a wait of %v with four workers holding 20 ms each", time.Duration(longest)*time.Microsecond)
		}
	})
}
