package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// PostgreSQL locks are advisory locks on a permanent per-name
// id (nothing written). During a rolling upgrade, instances older than
// schema version 14 still lock the row: until the protocol is switched,
// this version takes both, so old and new instances exclude each other.
func TestLockProtocolRollingUpgrade(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	ctx := context.Background()
	db := env.DB
	// The database ran an older sqlcoord (schema 13) and is upgraded.
	if err := migrate.Migrate(ctx, db, migrate.To(13)); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, db, `INSERT INTO coord_locks (name) VALUES ('report'), ('invoices')`)
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	if mode, err := sqlcoord.LockProtocol(ctx, db); err != nil || mode != sqlcoord.LocksDual {
		t.Fatalf("after an upgrade the protocol must keep row locks: %v %v", mode, err)
	}
	cdb := env.Open(t) // the new instance
	c := coord.New(cdb)
	begin := func() *sql.Tx {
		tx, err := cdb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	// oldHolds locks a name exactly as sqlcoord before version 14 does.
	oldHolds := func(name string) func() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO coord_locks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := tx.QueryRowContext(ctx, `SELECT name FROM coord_locks WHERE name = $1 FOR UPDATE`, name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback() }
	}
	oldTries := func(name string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var got string
		return tx.QueryRowContext(ctx, `SELECT name FROM coord_locks WHERE name = $1 FOR UPDATE NOWAIT`, name).Scan(&got)
	}

	t.Run("an old instance's row lock keeps a new instance out", func(t *testing.T) {
		release := oldHolds("report")
		defer release()
		tx := begin()
		defer tx.Rollback()
		if err := c.TryLock(ctx, tx, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("TryLock while an old instance holds the row: %v, want ErrLocked", err)
		}
		// The refused attempt released what it took: tx can lock another name.
		if err := c.TryLock(ctx, tx, "invoices"); err != nil {
			t.Fatalf("tx unusable after the refusal: %v", err)
		}
		tx2 := begin()
		defer tx2.Rollback()
		if err := c.Lock(ctx, tx2, "report", 300*time.Millisecond); !errors.Is(err, sqlcoord.ErrLockTimeout) {
			t.Fatalf("Lock while an old instance holds the row: %v, want ErrLockTimeout", err)
		}
	})
	t.Run("a new instance's lock keeps an old instance out", func(t *testing.T) {
		tx := begin()
		defer tx.Rollback()
		if err := c.TryLock(ctx, tx, "report"); err != nil {
			t.Fatal(err)
		}
		if err := oldTries("report"); err == nil {
			t.Fatal("an old instance locked a name a new instance holds")
		}
	})
	t.Run("a new instance's lock keeps another new instance out", func(t *testing.T) {
		tx := begin()
		defer tx.Rollback()
		if err := c.TryLock(ctx, tx, "report"); err != nil {
			t.Fatal(err)
		}
		tx2 := begin()
		defer tx2.Rollback()
		if err := c.TryLock(ctx, tx2, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("second new instance: %v, want ErrLocked", err)
		}
	})
	t.Run("the conformance suite, read-modify-write included, in dual mode", func(t *testing.T) {
		sqlcoordtest.Run(t, sqlcoordtest.Target[*sql.Tx]{Driver: cdb, Other: db, Tag: "dual", Workers: 4})
	})
	t.Run("after the switch: advisory only, nothing written", func(t *testing.T) {
		if err := sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisory); err != nil {
			t.Fatal(err)
		}
		tx := begin()
		defer tx.Rollback()
		if err := c.TryLock(ctx, tx, "report"); err != nil {
			t.Fatal(err)
		}
		var xid any
		if err := tx.QueryRowContext(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid); err != nil || xid != nil {
			t.Fatalf("a lock-only transaction was assigned a transaction id (it wrote): %v %v", xid, err)
		}
		tx2 := begin()
		defer tx2.Rollback()
		if err := c.TryLock(ctx, tx2, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("second holder after the switch: %v, want ErrLocked", err)
		}
		// Why the switch waits for every instance: an old one would not
		// see the advisory lock.
		if err := oldTries("report"); err != nil {
			t.Fatalf("expected the documented hazard (old instance not excluded after the switch), got %v", err)
		}
	})
	t.Run("a read-only transaction (as on a standby) is refused, not granted", func(t *testing.T) {
		// A standby grants advisory locks its primary never sees: two
		// holders. The lock statement checks and refuses.
		for _, wait := range []time.Duration{0, time.Second} {
			tx, err := cdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Lock(ctx, tx, "report", wait); !errors.Is(err, sqlcoord.ErrReadOnly) {
				t.Errorf("lock (wait %v) in a read-only transaction: %v, want ErrReadOnly", wait, err)
			}
			tx.Rollback()
		}
	})
	t.Run("a fresh database starts advisory-only", func(t *testing.T) {
		fresh := dbtest.New(t, "postgres")
		if mode, err := sqlcoord.LockProtocol(ctx, fresh.DB); err != nil || mode != sqlcoord.LocksAdvisory {
			t.Fatalf("fresh database: %v %v, want advisory only", mode, err)
		}
	})
}

// From schema 14 (advisory locks on each name's permanent id)
// to 15 (advisory locks on a hash of the name, rows only for display):
// until the protocol is switched, new instances take the id lock too.
func TestLockProtocolUpgradeFrom14(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	ctx := context.Background()
	db := env.DB
	if err := migrate.Migrate(ctx, db, migrate.To(14)); err != nil {
		t.Fatal(err)
	}
	// schema 14 on a fresh database: its Migrate switched row locks off
	dbtest.Exec(t, db, `UPDATE coord_lock_protocol SET row_locks = false`)
	dbtest.Exec(t, db, `INSERT INTO coord_locks (name) VALUES ('report')`)
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	if mode, err := sqlcoord.LockProtocol(ctx, db); err != nil || mode != sqlcoord.LocksAdvisoryID {
		t.Fatalf("after an upgrade from 14 the protocol must keep id locks: %v %v", mode, err)
	}
	cdb := env.Open(t)
	c := coord.New(cdb)
	begin := func(t *testing.T) *sql.Tx {
		tx, err := cdb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		return tx
	}
	// v14Tries locks a name exactly as sqlcoord of schema 14 does.
	v14Tries := func(tx *sql.Tx, name string) bool {
		var ok bool
		err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(1936813155, lock_id) FROM coord_locks WHERE name = $1`, name).Scan(&ok)
		if err != nil {
			t.Fatalf("schema 14 lock: %v", err)
		}
		return ok
	}
	t.Run("a schema 14 instance's lock keeps a new instance out", func(t *testing.T) {
		old, _ := db.BeginTx(ctx, nil)
		defer old.Rollback()
		if !v14Tries(old, "report") {
			t.Fatal("schema 14 instance could not lock a free name")
		}
		tx := begin(t)
		if err := c.TryLock(ctx, tx, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("TryLock while a schema 14 instance holds the id lock: %v, want ErrLocked", err)
		}
		if err := c.TryLock(ctx, tx, "other"); err != nil {
			t.Fatalf("tx unusable after the refusal: %v", err)
		}
	})
	t.Run("a new instance's lock keeps a schema 14 instance out, also on a name's first use", func(t *testing.T) {
		for _, name := range []string{"report", "brand-new"} {
			tx := begin(t)
			if err := c.Lock(ctx, tx, name, time.Second); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil { // the row (and its id) now exists for everyone
				t.Fatal(err)
			}
			tx = begin(t)
			if err := c.TryLock(ctx, tx, name); err != nil {
				t.Fatal(err)
			}
			old, _ := db.BeginTx(ctx, nil)
			if v14Tries(old, name) {
				t.Errorf("%s: a schema 14 instance locked a name a new instance holds", name)
			}
			old.Rollback()
		}
	})
	t.Run("the conformance suite, read-modify-write included, in advisory+id mode", func(t *testing.T) {
		sqlcoordtest.Run(t, sqlcoordtest.Target[*sql.Tx]{Driver: cdb, Other: db, Tag: "advid", Workers: 4})
	})
	t.Run("names keep their rows while schema 14 instances may run", func(t *testing.T) {
		if _, err := c.CleanupLocks(ctx, 0, 0); err == nil {
			t.Fatal("lock rows deleted while the id protocol is on")
		}
	})
	t.Run("after the switch: hash locks only, nothing written, names cleanable", func(t *testing.T) {
		if err := sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisory); err != nil {
			t.Fatal(err)
		}
		tx := begin(t)
		if err := c.TryLock(ctx, tx, "report"); err != nil {
			t.Fatal(err)
		}
		var xid any
		if err := tx.QueryRowContext(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid); err != nil || xid != nil {
			t.Fatalf("a lock-only transaction was assigned a transaction id (it wrote): %v %v", xid, err)
		}
		tx2 := begin(t)
		if err := c.TryLock(ctx, tx2, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("second holder after the switch: %v, want ErrLocked", err)
		}
		n, err := c.CleanupLocks(ctx, 0, 0)
		if err != nil || n < 2 {
			t.Fatalf("CleanupLocks: %d %v", n, err)
		}
		// the lock held across the cleanup still excludes
		tx3 := begin(t)
		if err := c.TryLock(ctx, tx3, "report"); !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("after its row was cleaned up, a held name let a second holder in: %v", err)
		}
	})
	t.Run("switching back gives every registered name an id", func(t *testing.T) {
		tx := begin(t)
		if err := c.TryLock(ctx, tx, "registered-in-hash-mode"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if dbtest.Count(t, db, `SELECT count(*) FROM coord_locks WHERE lock_id IS NULL`) == 0 {
			t.Fatal("a name registered under the hash protocol got an id (a sequence value per name)")
		}
		if err := sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisoryID); err != nil {
			t.Fatal(err)
		}
		if n := dbtest.Count(t, db, `SELECT count(*) FROM coord_locks WHERE lock_id IS NULL`); n != 0 {
			t.Fatalf("%d names without an id after switching back to advisory+id", n)
		}
		tx = begin(t)
		if err := c.TryLock(ctx, tx, "registered-in-hash-mode"); err != nil {
			t.Fatal(err)
		}
		old, _ := db.BeginTx(ctx, nil)
		defer old.Rollback()
		if v14Tries(old, "registered-in-hash-mode") {
			t.Fatal("after switching back, a schema 14 instance locked a held name")
		}
	})
}

// The lock statement no longer reads coord_lock_protocol; the
// protocol is a constant the planner folds (coord_lock_legacy, rewritten
// by a trigger). A switch back to an older protocol must reach a session
// whose lock statement is prepared and planned with the old constant, and
// SetLockProtocol returns only when the transactions open before the
// switch have ended.
func TestLockProtocolSwitchReachesCachedStatements(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := env.DB
	if err := migrate.Migrate(ctx, db, migrate.To(14)); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, db, `UPDATE coord_lock_protocol SET row_locks = false`)
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	if err := sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisory); err != nil {
		t.Fatal(err)
	}
	one := env.Open(t) // one connection: every lock below runs on the same session
	one.SetMaxOpenConns(1)
	c := coord.New(one)
	lockCommit := func(name string) {
		t.Helper()
		tx, err := one.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.TryLock(ctx, tx, name); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Enough locks that the session prepares both statement forms and
	// PostgreSQL settles on a generic plan.
	for range 12 {
		lockCommit("cached")
	}
	t.Run("SetLockProtocol waits for a transaction open before the switch", func(t *testing.T) {
		open, err := one.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Rollback() // on failure too: it holds the pool's one connection
		if _, err := open.ExecContext(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := sqlcoord.SetLockProtocol(short, db, sqlcoord.LocksAdvisoryID); !errors.Is(err, sqlcoord.ErrLockProtocol) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SetLockProtocol with a transaction open before the switch: %v, want ErrLockProtocol and the deadline", err)
		}
		done := make(chan error, 1)
		go func() { done <- sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisoryID) }()
		select {
		case err := <-done:
			t.Fatalf("SetLockProtocol returned (%v) while a transaction open before the switch was still open", err)
		case <-time.After(300 * time.Millisecond):
		}
		open.Rollback()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("SetLockProtocol still waiting after the transaction ended")
		}
	})
	t.Run("the cached session takes the older protocol's lock after the switch", func(t *testing.T) {
		tx, err := one.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := c.TryLock(ctx, tx, "cached"); err != nil {
			t.Fatal(err)
		}
		v14, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer v14.Rollback()
		var ok bool
		if err := v14.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(1936813155, lock_id) FROM coord_locks WHERE name = 'cached'`).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatal("after switching back to advisory+id, a schema 14 instance locked a name the cached session holds")
		}
	})
}
