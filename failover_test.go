package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/pgxv5"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// failoverWorld is what the failover tests do on a cluster: a lease with a
// fenced resource, a segment allocator and a job run, each advanced once
// while replication is healthy and once more while it is stalled (those
// acknowledged writes exist only on the old primary).
type failoverWorld struct {
	t    *testing.T
	db   *sqlcoord.DB
	c    *coord.Client[*sql.Tx]
	runs *jobs.Runs
}

const (
	foLease = "failover-lease"
	foRes   = "failover-resource"
	foTag   = "failover-ids"
	foJob   = "failover-job"
)

var foFire = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func newFailoverWorld(t *testing.T, dsn string) *failoverWorld {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &failoverWorld{t: t, db: db, c: coord.New(db), runs: jobs.NewRuns(db)}
}

func (w *failoverWorld) fence(ctx context.Context, token int64) error {
	return txn.Do(ctx, w.db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
		return w.c.Fence(ctx, tx, foRes, token)
	})
}

// acquireAfterFailover takes the test lease for owner on the promoted
// server, retrying while the pool replaces the connections the failover cut.
func (w *failoverWorld) acquireAfterFailover(ctx context.Context, owner string) (coord.Lease, error) {
	for {
		l, err := w.c.Acquire(ctx, foLease, owner, time.Minute)
		if err == nil || ctx.Err() != nil {
			return l, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ids fetches one fresh segment (a new allocator: another process) and
// returns its ids.
func (w *failoverWorld) ids(ctx context.Context) ([]int64, error) {
	seg, err := ids.NewSegments(w.db, foTag, ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10, Prefetch: 1})
	if err != nil {
		return nil, err
	}
	var out []int64
	for i := 0; i < 10; i++ {
		id, err := seg.Next(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, id)
	}
	return out, nil
}

// Asynchronous replication, a replication stall, then the whole
// primary is killed and the standby promoted without the stalled tail.
// The promoted server must never reissue a fencing token, a segment range
// or a job attempt the old primary acknowledged, and a paused holder of
// such a token must have its write refused.
func TestAsyncFailoverNeverReissues(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, false)
	asyncFailoverScenario(t, cl.DSN(), clusterHooks(cl))
}

// clusterHooks drive a loopback primary/standby pair.
func clusterHooks(cl *dbtest.PGCluster) failoverHooks {
	return failoverHooks{caughtUp: cl.WaitCaughtUp, stall: func() { cl.Link.SetStalled(true) }, failover: cl.Failover}
}

// failoverHooks drive a cluster for asyncFailoverScenario: wait until the
// standby has everything, stall replication, crash the primary and
// promote the standby.
type failoverHooks struct {
	caughtUp func(testing.TB)
	stall    func()
	failover func(testing.TB)
}

// asyncFailoverScenario is the async failover test on any cluster whose
// clients reach the primary at dsn (a floating proxy, or Patroni's nodes
// listed in a multi-host DSN).
func asyncFailoverScenario(t *testing.T, dsn string, h failoverHooks) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newFailoverWorld(t, dsn)
	if err := migrate.Migrate(ctx, w.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	info, err := sqlcoord.Inspect(ctx, w.db)
	if err != nil || info.Synchronous || info.Replicas != 1 || info.Timeline != 1 || info.ReadOnly {
		t.Fatalf("Inspect the async primary: %+v %v", info, err)
	}
	if _, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{RequireSyncReplication: true}); !errors.Is(err, sqlcoord.ErrNotSynchronous) {
		t.Fatalf("RequireSyncReplication on an async primary: %v, want ErrNotSynchronous", err)
	}

	// Healthy replication: A holds the lease briefly and fences with it;
	// one segment; the job's first attempt.
	a, err := w.c.Acquire(ctx, foLease, "A", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.c.Acquire(ctx, foLease+"-d", "D", time.Hour) // D's lease is live through the failover
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fence(ctx, a.Token); err != nil {
		t.Fatal(err)
	}
	if err := ids.CreateTag(ctx, w.db, foTag, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ids(ctx); err != nil {
		t.Fatal(err)
	}
	r1, err := w.runs.Claim(ctx, foJob, foFire, 0, 1, "runner-1")
	if err != nil {
		t.Fatal(err)
	}
	h.caughtUp(t)

	// Replication stalls. Everything acknowledged from here on exists
	// only on the old primary.
	h.stall()
	time.Sleep(300 * time.Millisecond) // A's lease expires; runner-1's heartbeat goes stale
	b, err := w.c.Acquire(ctx, foLease, "B", time.Minute)
	if err != nil || b.Owner != "B" {
		t.Fatalf("B acquire: %+v %v", b, err)
	}
	if err := w.fence(ctx, b.Token); err != nil {
		t.Fatal(err)
	}
	lostIDs, err := w.ids(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2s, err := w.runs.TakeOver(ctx, foJob, 100*time.Millisecond, "runner-2")
	if err != nil || len(r2s) != 1 {
		t.Fatalf("runner-2 takeover: %v %v", r2s, err)
	}
	r2 := r2s[0]
	// W1 leases a worker id (the grant exists only on the old primary)
	// through a link that the failover partitions: its heartbeats then
	// fail without an answer, and it issues ids until its lease validity
	// runs out.
	wopt := ids.WorkerOptions{TTL: 600 * time.Millisecond, Margin: 200 * time.Millisecond}
	w1link, w1dsn := throughProxy(t, dsn)
	w1db, err := sqlcoord.Open(ctx, w1dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer w1db.Close()
	w1, err := ids.LeaseWorker(ctx, w1db, wopt)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close(context.Background())
	t.Logf("acknowledged on the old primary only: token %d (A had %d), ids %d..%d, attempt %d (runner-1 had %d)",
		b.Token, a.Token, lostIDs[0], lostIDs[len(lostIDs)-1], r2.Attempt, r1.Attempt)

	w1link.SetDown(true)
	h.failover(t)
	// W1 keeps issuing ids until its lease validity runs out (its
	// heartbeats now fail); W2 leases a worker id on the promoted server.
	w1Last := make(chan time.Time, 1)
	go func() {
		last := time.Now()
		for {
			if _, err := w1.Next(); err != nil {
				w1Last <- last
				return
			}
			last = time.Now()
			time.Sleep(time.Millisecond)
		}
	}()

	// The promoted standby: C takes the lease, D a segment, runner-3 the job.
	cTok, err := w.acquireAfterFailover(ctx, "C")
	if err != nil || cTok.Owner != "C" {
		t.Fatalf("C acquire after failover: %+v %v", cTok, err)
	}
	if info, err := sqlcoord.Inspect(ctx, w.db); err != nil || info.Timeline != 2 {
		t.Errorf("Inspect the promoted standby: %+v %v, want timeline 2", info, err)
	}
	t.Logf("after the failover: C's token %d, B's %d", cTok.Token, b.Token)
	t.Run("lease token never reissued", func(t *testing.T) {
		if cTok.Token <= b.Token {
			t.Errorf("C got token %d after B's %d was acknowledged: reissued or backwards", cTok.Token, b.Token)
		}
	})
	if err := w.fence(ctx, cTok.Token); err != nil {
		t.Fatalf("C fences: %v", err)
	}
	t.Run("paused holder's stale write refused", func(t *testing.T) {
		if err := w.fence(ctx, b.Token); !errors.Is(err, coord.ErrStaleToken) {
			t.Errorf("B (paused, token %d) writes after C (token %d): %v, want ErrStaleToken", b.Token, cTok.Token, err)
		}
	})
	t.Run("a lease from before the promotion cannot be renewed", func(t *testing.T) {
		// D's row survived, but the promoted server cannot know whether it
		// lost a later grant: D must acquire again, with a new-epoch token.
		if _, err := w.c.Renew(ctx, d); !errors.Is(err, coord.ErrLeaseLost) {
			t.Errorf("D renews its pre-failover lease: %v, want ErrLeaseLost", err)
		}
		d2, err := w.c.Acquire(ctx, foLease+"-d", "D", time.Hour)
		if err != nil || d2.Token <= b.Token {
			t.Errorf("D re-acquires: %+v %v, want a token above every pre-failover token", d2, err)
		}
	})
	t.Run("segment ids never issued twice", func(t *testing.T) {
		got, err := w.ids(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lost := map[int64]bool{}
		for _, id := range lostIDs {
			lost[id] = true
		}
		for _, id := range got {
			if lost[id] {
				t.Fatalf("id %d issued before the failover (acknowledged) and again after it; got %v", id, got)
			}
		}
	})
	t.Run("worker id not granted while its lost holder still issues", func(t *testing.T) {
		w2, err := ids.LeaseWorker(ctx, w.db, wopt)
		if err != nil {
			t.Fatal(err)
		}
		granted := time.Now()
		defer w2.Close(context.Background())
		last := <-w1Last
		if w2.ID() == w1.ID() && !last.Before(granted) {
			t.Errorf("worker id %d granted to W2 at %v while W1 (whose grant was lost) issued ids until %v",
				w2.ID(), granted.Format("15:04:05.000"), last.Format("15:04:05.000"))
		}
		t.Logf("W1 (id %d) issued until %v; W2 got id %d at %v", w1.ID(), last.Format("15:04:05.000"), w2.ID(), granted.Format("15:04:05.000"))
	})
	t.Run("job attempt never reissued", func(t *testing.T) {
		var r3s []jobs.Run
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if r3s, err = w.runs.TakeOver(ctx, foJob, 100*time.Millisecond, "runner-3"); err != nil || len(r3s) == 1 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || len(r3s) != 1 {
			t.Fatalf("runner-3 takeover: %v %v", r3s, err)
		}
		if r3s[0].Attempt == r2.Attempt {
			t.Errorf("runner-3 got attempt %d, the number runner-2 was acknowledged before the failover", r3s[0].Attempt)
		}
		// runner-2 (paused through the failover) must be refused
		err := txn.Do(ctx, w.db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
			return jobs.Fence(ctx, w.db, tx, r2)
		})
		if !errors.Is(err, jobs.ErrSuperseded) {
			t.Errorf("runner-2 fences attempt %d after runner-3 took attempt %d: %v, want ErrSuperseded", r2.Attempt, r3s[0].Attempt, err)
		}
	})
}

// throughProxy puts a proxy in front of the first host of a PostgreSQL
// URL DSN and returns it with the DSN pointed at it (only that host).
func throughProxy(t *testing.T, dsn string) (*dbtest.Proxy, string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Split(u.Host, ",")[0]
	p := dbtest.NewProxy(t, first)
	u.Host = p.Addr
	return p, u.String()
}

// A hot standby is refused at Open with ErrReadOnly, not
// discovered later as an unmapped 25006.
func TestOpenRefusesHotStandby(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("Open", func(t *testing.T) {
		_, err := sqlcoord.Open(ctx, cl.StandbyDSN())
		if !errors.Is(err, sqlcoord.ErrReadOnly) {
			t.Fatalf("Open on a hot standby: %v, want ErrReadOnly", err)
		}
		t.Logf("%v", err)
	})
	t.Run("WrapPgxPool", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, cl.StandbyDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if _, err := pgxv5.Wrap(ctx, pool); !errors.Is(err, sqlcoord.ErrReadOnly) {
			t.Fatalf("WrapPgxPool on a hot standby: %v, want ErrReadOnly", err)
		}
	})
	t.Run("AllowReadOnly inspects it", func(t *testing.T) {
		db, err := sqlcoord.Open(ctx, cl.StandbyDSN(), sqlcoord.Options{AllowReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := sqlcoord.CheckSchema(ctx, db); err != nil && !errors.Is(err, sqlcoord.ErrNoSchema) {
			t.Fatalf("CheckSchema on the standby: %v", err)
		}
	})
	// A standby grants advisory locks its primary never sees; the lock
	// statement refuses them because every standby transaction is
	// read-only (transaction_read_only is on there).
	t.Run("a lock on the standby is refused", func(t *testing.T) {
		p, err := sqlcoord.Open(ctx, cl.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := migrate.Migrate(ctx, p, migrate.Up); err != nil {
			t.Fatal(err)
		}
		// The name is recorded (its first lock on the primary), so the
		// standby's lock would write nothing: only the check refuses it.
		if err := txn.Do(ctx, p, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			return coord.New(p).TryLock(ctx, tx, "on-standby")
		}); err != nil {
			t.Fatal(err)
		}
		cl.WaitCaughtUp(t)
		db, err := sqlcoord.Open(ctx, cl.StandbyDSN(), sqlcoord.Options{AllowReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		c := coord.New(db)
		for _, wait := range []time.Duration{0, time.Second} {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Lock(ctx, tx, "on-standby", wait); !errors.Is(err, sqlcoord.ErrReadOnly) {
				t.Errorf("lock (wait %v) on a hot standby: %v, want ErrReadOnly", wait, err)
			}
			tx.Rollback()
		}
	})
}

// A MariaDB replica (read_only) is refused too.
func TestOpenRefusesReadOnlyMariaDB(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "mysql")
	ctx := context.Background()
	dbtest.Exec(t, env.DB, `SET GLOBAL read_only = 1`)
	defer env.DB.ExecContext(ctx, `SET GLOBAL read_only = 0`)
	if _, err := sqlcoord.Open(ctx, env.DSN); !errors.Is(err, sqlcoord.ErrReadOnly) {
		t.Fatalf("Open with read_only=1: %v, want ErrReadOnly", err)
	}
	info, err := sqlcoord.Inspect(ctx, env.DB)
	if err != nil || !info.ReadOnly || info.Synchronous || info.Galera {
		t.Fatalf("Inspect a read_only MariaDB: %+v %v", info, err)
	}
	if _, err := sqlcoord.Open(ctx, env.DSN, sqlcoord.Options{AllowReadOnly: true, RequireSyncReplication: true}); !errors.Is(err, sqlcoord.ErrNotSynchronous) {
		t.Fatalf("RequireSyncReplication on a lone MariaDB: %v, want ErrNotSynchronous", err)
	}
	raw, err := sql.Open("mysql", env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := sqlcoord.WrapDB(ctx, raw); !errors.Is(err, sqlcoord.ErrReadOnly) {
		t.Fatalf("WrapDB with read_only=1: %v, want ErrReadOnly", err)
	}
}

// Synchronous replication (synchronous_standby_names='*'): a
// write during the replication stall is never acknowledged, and after the
// failover everything acknowledged before it is there.
func TestSyncFailoverLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, true)
	syncFailoverScenario(t, cl.DSN(), clusterHooks(cl))
}

// syncFailoverScenario is the sync failover test on any cluster (see
// asyncFailoverScenario).
func syncFailoverScenario(t *testing.T, dsn string, h failoverHooks) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newFailoverWorld(t, dsn)
	if err := migrate.Migrate(ctx, w.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	sdb, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{RequireSyncReplication: true})
	if err != nil {
		t.Fatalf("RequireSyncReplication on a sync primary: %v", err)
	}
	sdb.Close()
	a, err := w.c.Acquire(ctx, foLease, "A", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fence(ctx, a.Token); err != nil {
		t.Fatal(err)
	}
	if err := ids.CreateTag(ctx, w.db, foTag, 0); err != nil {
		t.Fatal(err)
	}
	first, err := w.ids(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.caughtUp(t)
	h.stall()
	time.Sleep(300 * time.Millisecond)
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	b, err := w.c.Acquire(sctx, foLease, "B", time.Minute)
	scancel()
	if err == nil {
		t.Fatalf("B's acquire was acknowledged while the synchronous standby could not confirm it: %+v", b)
	}
	h.failover(t)
	c, err := w.acquireAfterFailover(ctx, "C")
	if err != nil || c.Token <= a.Token {
		t.Fatalf("C after failover: %+v %v (A had %d)", c, err, a.Token)
	}
	if err := w.fence(ctx, c.Token); err != nil {
		t.Fatal(err)
	}
	if err := w.fence(ctx, a.Token); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("A (token %d) writes after C (token %d): %v, want ErrStaleToken", a.Token, c.Token, err)
	}
	next, err := w.ids(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next[0] <= first[len(first)-1] {
		t.Fatalf("ids after failover %v overlap the acknowledged %v", next, first)
	}
}
