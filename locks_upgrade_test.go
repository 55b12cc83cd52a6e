package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

// Issue 14: PostgreSQL locks are advisory locks on a permanent per-name
// id (nothing written). During a rolling upgrade, instances older than
// schema version 14 still lock the row: until the protocol is switched,
// this version takes both, so old and new instances exclude each other.
func TestLockProtocolRollingUpgrade(t *testing.T) {
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	ctx := context.Background()
	db := env.DB
	// The database ran an older sqlcoord (schema 13) and is upgraded.
	if err := sqlcoord.Migrate(ctx, db, sqlcoord.To(13)); err != nil {
		t.Fatal(err)
	}
	dbtest.Exec(t, db, `INSERT INTO coord_locks (name) VALUES ('report'), ('invoices')`)
	if err := sqlcoord.Migrate(ctx, db, sqlcoord.Up); err != nil {
		t.Fatal(err)
	}
	if rowLocks, err := sqlcoord.LockProtocol(ctx, db); err != nil || !rowLocks {
		t.Fatalf("after an upgrade the protocol must keep row locks: %v %v", rowLocks, err)
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
		if err := c.TryLock(ctx, tx, "report"); !errors.Is(err, dialects.ErrLocked) {
			t.Fatalf("TryLock while an old instance holds the row: %v, want ErrLocked", err)
		}
		// The refused attempt released what it took: tx can lock another name.
		if err := c.TryLock(ctx, tx, "invoices"); err != nil {
			t.Fatalf("tx unusable after the refusal: %v", err)
		}
		tx2 := begin()
		defer tx2.Rollback()
		if err := c.Lock(ctx, tx2, "report", 300*time.Millisecond); !errors.Is(err, dialects.ErrLockTimeout) {
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
		if err := c.TryLock(ctx, tx2, "report"); !errors.Is(err, dialects.ErrLocked) {
			t.Fatalf("second new instance: %v, want ErrLocked", err)
		}
	})
	t.Run("after the switch: advisory only, nothing written", func(t *testing.T) {
		if err := sqlcoord.SetLockProtocol(ctx, db, false); err != nil {
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
		if err := c.TryLock(ctx, tx2, "report"); !errors.Is(err, dialects.ErrLocked) {
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
			if err := c.Lock(ctx, tx, "report", wait); !errors.Is(err, dialects.ErrReadOnly) {
				t.Errorf("lock (wait %v) in a read-only transaction: %v, want ErrReadOnly", wait, err)
			}
			tx.Rollback()
		}
	})
	t.Run("a fresh database starts advisory-only", func(t *testing.T) {
		fresh := dbtest.New(t, "postgres")
		if rowLocks, err := sqlcoord.LockProtocol(ctx, fresh.DB); err != nil || rowLocks {
			t.Fatalf("fresh database: row locks %v %v, want advisory only", rowLocks, err)
		}
	})
}
