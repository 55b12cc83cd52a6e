// Package sqlcoordtest is sqlcoord's test kit: Run is the behavioural
// suite every dialect and every application stack passes (golang-migrate's
// database/testing.Test is the model): the same subtests, one per
// behaviour, run against a sqlcoord.Driver — sqlcoord.Open's pool, a
// wrapped *sql.DB, *sqlx.DB or *pgxpool.Pool, direct or through PgBouncer,
// on PostgreSQL, MariaDB or MySQL, or a dialect of your own
// (dialects.Derive). A dialect or a stack is done when Run passes on it.
// Package sqlcoordtest/dbtest gives a test a fresh database on a
// throwaway server; sqlcoordtest/localdb starts the servers.
//
// Like River's riverdbtest, the kit carries no compatibility promise: it
// changes with the suite, in minor releases too.
//
// The driver's pool may be limited to ONE connection: no helper may need
// a second connection while the caller's transaction holds one, so such a
// helper would hang to the deadline and fail the suite.
package sqlcoordtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Target is what Test runs against.
type Target[TTx any] struct {
	// Driver is the stack under test; its database has the schema.
	Driver sqlcoord.Driver[TTx]
	// Other is an independent pool on the same database (its own
	// connections, not through Driver), the second session in checks
	// such as "a held lock refuses another transaction".
	Other *sqlcoord.DB
	// Tag keeps names apart when several targets share a database.
	Tag string
	// Workers is how many goroutines the concurrency subtest runs; 0
	// skips it (a one-connection pool serialises everything anyway).
	Workers int
	// Pooler: the driver reaches PostgreSQL through a transaction-mode
	// PgBouncer. There a statement is occasionally canceled (57014) by a
	// cancel request meant for another client of the same server
	// connection; the concurrency subtest then runs that transaction once
	// more (and logs it) instead of failing.
	Pooler bool
}

// Run runs the suite; every subtest names one behaviour.
func Run[TTx any](t *testing.T, tg Target[TTx]) {
	s := &suite[TTx]{Target: tg, c: coord.New(tg.Driver), oc: coord.New(tg.Other)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := "conf_items_" + tg.Tag
	if _, err := tg.Other.Executor().Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id VARCHAR(80) PRIMARY KEY, body VARCHAR(80), fence BIGINT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatalf("conformance table: %v", err)
	}
	s.table = table
	t.Run("TryLock/excludes a second transaction until commit", s.tryLockExcludes)
	t.Run("Lock/waits for a holder, then times out", s.lockTimesOut)
	t.Run("Lock/rollback releases", s.rollbackReleases)
	t.Run("Lock/read-modify-write under contention loses no update", s.readModifyWrite)
	t.Run("Lease/second owner refused, token grows on takeover", s.leaseTokens)
	t.Run("Fence/stale token refused", s.fenceStale)
	t.Run("Election/resign hands over with a larger term, observed", s.election)
	t.Run("Semaphore/at most N, released permit reusable", s.semaphore)
	t.Run("FencedUpdate/equal values accepted, stale refused", s.fencedUpdate)
	t.Run("Keys/replay returns the stored response", s.keysReplay)
	t.Run("Barrier/cancel before try skips the try", s.barrier)
	t.Run("Outbox/rolled back never published, committed once", s.outbox)
	t.Run("Inbox/second receive is not first", s.inbox)
	t.Run("Jobs/a slot is claimed once", s.jobsOnce)
	t.Run("Segments/ranges never overlap", s.segments)
	t.Run("Do/commit marker: a committed callback is not run again", s.commitMarker)
	t.Run("Saga/committed runs every action, a refused step compensates, rolled back never exists", s.sagaRuns)
	t.Run("Session/one of two saves of a version conflicts, revoked does not load", s.sessionsConflict)
	t.Run("Membership/members listed until they leave", s.membersListed)
	t.Run("Stream/committed messages once in commit order, rolled back never", func(t *testing.T) {
		if err := outbox.CanStream(ctx, tg.Other); err != nil {
			t.Skipf("the server does not stream: %v", err)
		}
		s.streamInCommitOrder(t)
	})
	if tg.Workers > 0 {
		t.Run("Concurrency/every helper from many goroutines", s.concurrency)
	}
}

type suite[TTx any] struct {
	Target[TTx]
	c     *coord.Client[TTx]
	oc    *coord.Client[*sql.Tx]
	table string
}

func (s *suite[TTx]) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// name is a per-target, per-subtest name.
func (s *suite[TTx]) name(what string) string { return s.Tag + "-" + what }

// do runs fn in a transaction of the stack under test.
func (s *suite[TTx]) do(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error {
	return txn.Do(ctx, s.Driver, txn.Options{MaxAttempts: 1}, fn)
}

// otherTx runs fn in a transaction of the independent pool, rolled back.
func (s *suite[TTx]) otherTx(t *testing.T, ctx context.Context, fn func(tx *sql.Tx)) {
	t.Helper()
	tx, err := s.Other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fn(tx)
}

func (s *suite[TTx]) tryLockExcludes(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("trylock")
	err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		if err := s.c.TryLock(ctx, tx, name); err != nil { // first use: the row is created in tx
			return err
		}
		s.otherTx(t, ctx, func(otx *sql.Tx) {
			if err := s.oc.TryLock(ctx, otx, name); !errors.Is(err, sqlcoord.ErrLocked) {
				t.Errorf("second holder: %v, want ErrLocked", err)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.otherTx(t, ctx, func(otx *sql.Tx) {
		if err := s.oc.TryLock(ctx, otx, name); err != nil {
			t.Errorf("after commit: %v, want the lock", err)
		}
	})
}

func (s *suite[TTx]) lockTimesOut(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("lockwait")
	s.otherTx(t, ctx, func(otx *sql.Tx) {
		if err := s.oc.TryLock(ctx, otx, name); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := s.do(ctx, func(ctx context.Context, tx TTx) error {
			return s.c.Lock(ctx, tx, name, 300*time.Millisecond)
		})
		if !errors.Is(err, sqlcoord.ErrLockTimeout) {
			t.Errorf("Lock on a held lock: %v, want ErrLockTimeout", err)
		}
		if el := time.Since(start); el < 250*time.Millisecond {
			t.Errorf("Lock gave up after %v, want about 300ms", el)
		}
	})
	// free now: Lock returns at once
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error { return s.c.Lock(ctx, tx, name, time.Second) }); err != nil {
		t.Errorf("Lock on a free lock: %v", err)
	}
}

func (s *suite[TTx]) rollbackReleases(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("rollback")
	boom := errors.New("boom")
	err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		if err := s.c.TryLock(ctx, tx, name); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do: %v", err)
	}
	s.otherTx(t, ctx, func(otx *sql.Tx) {
		if err := s.oc.TryLock(ctx, otx, name); err != nil {
			t.Errorf("after rollback: %v, want the lock", err)
		}
	})
}

func (s *suite[TTx]) leaseTokens(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("lease")
	a, err := s.c.Acquire(ctx, name, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.Acquire(ctx, name, "b", time.Minute); !errors.Is(err, coord.ErrLeaseHeld) {
		t.Fatalf("second owner: %v, want ErrLeaseHeld", err)
	}
	r, err := s.c.Renew(ctx, a)
	if err != nil || r.Token != a.Token {
		t.Fatalf("renew: %+v %v (token must stay %d)", r, err, a.Token)
	}
	if err := s.c.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	b, err := s.c.Acquire(ctx, name, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token <= a.Token {
		t.Fatalf("takeover token %d, want > %d", b.Token, a.Token)
	}
	if _, err := s.c.Renew(ctx, a); !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("old owner renews: %v, want ErrLeaseLost", err)
	}
	s.c.Release(ctx, b)
}

func (s *suite[TTx]) election(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("election")
	a, err := s.c.Election(name, coord.ElectionOptions{ID: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// the waiting candidate and the observer use the independent pool: a
	// campaign waits holding a connection (a one-connection stack would
	// have none left for the leader's resign)
	b, err := s.oc.Election(name, coord.ElectionOptions{ID: "b", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen, err := b.Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Campaign(ctx, "va")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Leader(ctx); err != nil || got.ID != "a" || got.Value != "va" {
		t.Fatalf("leader %+v %v", got, err)
	}
	won := make(chan *coord.Leadership, 1)
	go func() {
		l, err := b.Campaign(ctx, "vb")
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	time.Sleep(100 * time.Millisecond)
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-won
	if lb == nil {
		return
	}
	defer lb.Resign(ctx)
	if lb.Term() <= la.Term() {
		t.Fatalf("term %d after %d", lb.Term(), la.Term())
	}
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error { return s.c.Fence(ctx, tx, name, lb.Term()) }); err != nil {
		t.Fatal(err)
	}
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error { return s.c.Fence(ctx, tx, name, la.Term()) }); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("the old leader's fenced write: %v, want ErrStaleToken", err)
	}
	for l := range seen {
		if l.Term == lb.Term() && l.Live {
			return
		}
	}
	t.Fatal("the observer never saw the second term")
}

func (s *suite[TTx]) semaphore(t *testing.T) {
	ctx := s.ctx(t)
	sem, err := s.c.Semaphore(s.name("semaphore"), 2)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := sem.TryAcquire(ctx, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem.Acquire(ctx, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx, "", time.Minute); !errors.Is(err, coord.ErrSemaphoreFull) {
		t.Fatalf("third permit: %v, want ErrSemaphoreFull", err)
	}
	if err := sem.Release(ctx, p1); err != nil {
		t.Fatal(err)
	}
	p3, err := sem.Acquire(ctx, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sem.Release(ctx, p2)
	sem.Release(ctx, p3)
}

func (s *suite[TTx]) fenceStale(t *testing.T) {
	ctx := s.ctx(t)
	res := s.name("fence")
	for _, tok := range []int64{5, 5, 7} {
		if err := s.do(ctx, func(ctx context.Context, tx TTx) error { return s.c.Fence(ctx, tx, res, tok) }); err != nil {
			t.Fatalf("Fence %d: %v", tok, err)
		}
	}
	err := s.do(ctx, func(ctx context.Context, tx TTx) error { return s.c.Fence(ctx, tx, res, 6) })
	if !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("Fence 6 after 7: %v, want ErrStaleToken", err)
	}
}

func (s *suite[TTx]) fencedUpdate(t *testing.T) {
	ctx := s.ctx(t)
	id := s.name("row")
	if _, err := s.Other.Executor().Exec(ctx, s.Other.Rebind(`INSERT INTO `+s.table+` (id, body) VALUES (?, 'same')`), id); err != nil {
		t.Fatal(err)
	}
	upd := func(tok int64) error {
		return s.do(ctx, func(ctx context.Context, tx TTx) error {
			return s.c.Update(ctx, tx, coord.FencedUpdate{Table: s.table, KeyColumn: "id", Key: id, FenceColumn: "fence",
				Token: tok, Set: map[string]any{"body": "same"}})
		})
	}
	// the same values twice: accepted both times whatever the driver's
	// settings (no clientFoundRows needed)
	for i := 0; i < 2; i++ {
		if err := upd(9); err != nil {
			t.Fatalf("equal rewrite %d: %v", i, err)
		}
	}
	if err := upd(8); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("stale update: %v, want ErrStaleToken", err)
	}
	var fence int64
	if err := s.Other.Executor().QueryRow(ctx, s.Other.Rebind(`SELECT fence FROM `+s.table+` WHERE id = ?`), id).Scan(&fence); err != nil || fence != 9 {
		t.Fatalf("fence column %d %v, want 9", fence, err)
	}
}

func (s *suite[TTx]) keysReplay(t *testing.T) {
	ctx := s.ctx(t)
	keys := txn.NewKeys(s.Driver, txn.KeysOptions{})
	key := s.name("key")
	err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		cl, err := keys.Begin(ctx, tx, "conformance", key, []byte("req"))
		if err != nil || cl.Replay {
			return errors.Join(err, errors.New("a fresh key replayed"))
		}
		return keys.Complete(ctx, tx, "conformance", key, []byte("resp"))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.do(ctx, func(ctx context.Context, tx TTx) error {
		cl, err := keys.Begin(ctx, tx, "conformance", key, []byte("req"))
		if err != nil || !cl.Replay || string(cl.Response) != "resp" {
			return errors.Join(err, fmt.Errorf("replay %+v", cl))
		}
		_, err = keys.Begin(ctx, tx, "conformance", key, []byte("another request"))
		if !errors.Is(err, txn.ErrKeyReused) {
			return fmt.Errorf("another fingerprint: %v, want ErrKeyReused", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *suite[TTx]) barrier(t *testing.T) {
	ctx := s.ctx(t)
	b := txn.NewBarrier(s.Driver)
	gid := s.name("gid")
	ran := map[txn.Op]bool{}
	call := func(op txn.Op) {
		err := s.do(ctx, func(ctx context.Context, tx TTx) error {
			_, err := b.CallTx(ctx, tx, gid, "b1", op, func(context.Context, TTx) error { ran[op] = true; return nil })
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	call(txn.OpCancel) // the cancel arrives first (the try was delayed)
	call(txn.OpTry)
	call(txn.OpCancel) // a duplicate
	if ran[txn.OpCancel] || ran[txn.OpTry] {
		t.Fatalf("ran %v: want neither the null compensation nor the hanging try", ran)
	}
}

func (s *suite[TTx]) outbox(t *testing.T) {
	ctx := s.ctx(t)
	ob := outbox.New(s.Driver)
	topic := s.name("topic")
	boom := errors.New("boom")
	err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: topic, Payload: []byte("rolled back")}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		return ob.Enqueue(ctx, tx, outbox.Msg{Topic: topic, Key: "k", Payload: []byte("committed")})
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	r, err := outbox.NewRelay(s.Driver, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Topic == topic {
			got = append(got, string(m.Payload))
		}
		return nil
	}), outbox.RelayOptions{BatchSize: 1000, Listen: outbox.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || got[0] != "committed" {
		t.Fatalf("published %q, want only the committed message, once", got)
	}
}

func (s *suite[TTx]) inbox(t *testing.T) {
	ctx := s.ctx(t)
	in, err := outbox.NewInbox(s.Driver, s.name("consumer"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		err := s.do(ctx, func(ctx context.Context, tx TTx) error {
			first, err := in.Receive(ctx, tx, "msg-1")
			if err == nil && first != want {
				err = fmt.Errorf("receive %d: first=%v, want %v", i, first, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (s *suite[TTx]) jobsOnce(t *testing.T) {
	ctx := s.ctx(t)
	runs := jobs.NewRuns(s.Driver)
	job := s.name("job")
	fire := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := runs.Claim(ctx, job, fire, 0, 1, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Claim(ctx, job, fire, 0, 1, "b"); !errors.Is(err, jobs.ErrAlreadyClaimed) {
		t.Fatalf("second claim: %v, want ErrAlreadyClaimed", err)
	}
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		if err := jobs.Fence(ctx, s.Driver, tx, run); err != nil {
			return err
		}
		return jobs.Complete(ctx, s.Driver, tx, run)
	}); err != nil {
		t.Fatalf("fence + complete in the app's transaction: %v", err)
	}
}

func (s *suite[TTx]) segments(t *testing.T) {
	ctx := s.ctx(t)
	tag := s.name("seg")
	if err := ids.CreateTag(ctx, s.Driver, tag, 0); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for a := 0; a < 2; a++ { // two allocators: two processes' worth
		seg, err := ids.NewSegments(s.Driver, tag, ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 25; i++ {
			id, err := seg.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d issued twice", id)
			}
			seen[id] = true
		}
	}
}

func (s *suite[TTx]) commitMarker(t *testing.T) {
	ctx := s.ctx(t)
	marker := s.name("marker")
	calls := 0
	for i := 0; i < 2; i++ {
		err := txn.Do(ctx, s.Driver, txn.Options{CommitMarker: marker}, func(ctx context.Context, tx TTx) error {
			calls++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("callback ran %d times for one marker, want 1", calls)
	}
}

// concurrency runs every kind of helper from Workers goroutines: many
// client connections sharing few server connections is what made
// prepared statements collide behind PgBouncer.
func (s *suite[TTx]) concurrency(t *testing.T) {
	ctx := s.ctx(t)
	keys := txn.NewKeys(s.Driver, txn.KeysOptions{})
	ob := outbox.New(s.Driver)
	runs := jobs.NewRuns(s.Driver)
	var mu sync.Mutex
	var errs []error
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	var wg sync.WaitGroup
	for w := 0; w < s.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				id := s.name(fmt.Sprintf("c%d-%d", w, i))
				lease, err := s.c.Acquire(ctx, "lease-"+id, "", time.Minute)
				if err != nil {
					fail("acquire", err)
					continue
				}
				body := func(ctx context.Context, tx TTx) error {
					if err := s.c.TryLock(ctx, tx, s.name(fmt.Sprintf("hot-%d", i%3))); err != nil && !errors.Is(err, sqlcoord.ErrLocked) {
						return fmt.Errorf("trylock: %w", err)
					}
					if err := s.c.Fence(ctx, tx, "res-"+id, lease.Token); err != nil {
						return fmt.Errorf("fence: %w", err)
					}
					if _, err := keys.Begin(ctx, tx, "conformance", id, nil); err != nil {
						return fmt.Errorf("keys: %w", err)
					}
					if err := keys.Complete(ctx, tx, "conformance", id, []byte("ok")); err != nil {
						return fmt.Errorf("keys complete: %w", err)
					}
					return ob.Enqueue(ctx, tx, outbox.Msg{Topic: s.name("hammer"), Payload: []byte(id)})
				}
				err = txn.Do(ctx, s.Driver, txn.Options{}, body)
				if err != nil && s.Pooler && errors.Is(err, sqlcoord.ErrQueryCanceled) {
					t.Logf("behind the pooler, a statement was canceled by a stray cancel request; running the transaction again: %v", err)
					err = txn.Do(ctx, s.Driver, txn.Options{}, body)
				}
				if err != nil {
					fail("tx", err)
				}
				if _, err := runs.Claim(ctx, s.name("hammer"), time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC), 0, 1, id); err != nil && !errors.Is(err, jobs.ErrAlreadyClaimed) {
					fail("claim", err)
				}
				if err := s.c.Release(ctx, lease); err != nil {
					fail("release", err)
				}
			}
		}()
	}
	wg.Wait()
	if err := sqlcoord.CheckSchema(ctx, s.Driver); err != nil {
		fail("check schema", err)
	}
	for i, err := range errs {
		if i == 5 {
			t.Errorf("… %d errors in all", len(errs))
			break
		}
		t.Errorf("%v", err)
	}
}
