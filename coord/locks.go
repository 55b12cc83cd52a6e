package coord

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// ErrLockRowMissing: the coord_locks row disappeared between creation and
// locking (someone deleted it). Retry the transaction.
var ErrLockRowMissing = errors.New("coord: lock row missing (deleted concurrently); retry")

// TryLock locks name for the rest of tx's life, or returns an error that
// matches sqlcoord.ErrLocked at once when another transaction holds it.
// Commit or rollback releases the lock; so does the end of the holder's
// session (crash, kill -9, cut connection), which the server notices at
// once. A holder that is alive but frozen keeps the lock until a server-side
// timeout ends its session: see SetIdleTimeout.
//
// What the lock protects: everything tx reads after TryLock returns sees
// what every earlier holder committed, so a read-modify-write under the
// lock never loses an update (tested at every isolation level, across
// processes, with holders killed and frozen). It does not protect:
//
//   - reads tx made before the lock was granted. On MySQL/MariaDB at
//     REPEATABLE READ (the default) this includes the snapshot itself: a
//     plain SELECT of any table before TryLock fixes the transaction's
//     read view, and later plain SELECTs keep answering from it. Take the
//     lock first in the transaction (sqlcoord itself runs no statement
//     before the lock), use READ COMMITTED, or read with FOR UPDATE.
//   - a PostgreSQL REPEATABLE READ or SERIALIZABLE transaction: there the
//     lock statement itself takes the snapshot before the lock is granted,
//     so TryLock and Lock refuse with ErrLockIsolation (nothing locked,
//     tx still usable). Lock in a READ COMMITTED transaction.
//   - a writer that does not take the lock: it is advisory for everyone
//     who does not ask for it.
//
// PostgreSQL: pg_try_advisory_xact_lock on a 64-bit hash of the name, one
// statement, nothing written — a transaction that only locks commits
// without flushing WAL. Two names whose hashes collide (a chance of about
// n²/2⁶⁵ among n names) exclude each other; two holders of one name are
// impossible. A name's first use also records it in coord_locks, only so
// that the console can name held locks (CleanupLocks deletes old rows);
// the Client remembers for a minute which names it saw recorded, and
// their locks skip that look (dialects.LockNames). Whether an older lock
// protocol is on is folded into the statement as a constant (migration
// 22), so a lock reads no table.
// During a rolling upgrade from an older schema the older instances'
// locks are taken too (see sqlcoord.SetLockProtocol).
//
// MySQL/MariaDB: one INSERT … ON DUPLICATE KEY UPDATE of the name's row
// in tx that either creates the row (first use: nobody else can lock it
// before tx commits) or takes its exclusive record lock without waiting
// (InnoDB keeps row locks in memory; the no-op update writes nothing).
// On MySQL 8, whose lock waits are whole seconds of at least one, TryLock
// may wait up to a second (untested: Debian ships no MySQL 8 server).
//
// After ErrLocked tx is still usable on both dialects (PostgreSQL's try
// does not raise; MySQL/MariaDB's lock wait error rolls back the
// statement only): the caller may go on without the lock, try another
// name, or commit. No second pooled connection is ever needed, so it
// works with a pool of one connection and behind PgBouncer.
//
// One rare retryable outcome on MySQL/MariaDB REPEATABLE READ: when the
// transaction that created a name rolls back while two or more others
// wait for that name, InnoDB may pick one of them as a deadlock victim
// (ErrDeadlock, retryable; txn.Do runs it again).
func (c *Client[TTx]) TryLock(ctx context.Context, tx TTx, name string) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lock.try", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	if err := validName("lock", name); err != nil {
		return err
	}
	return c.lockResult(name, c.d.LockTry(ctx, c.tx.TxExecutor(tx), name, &c.names))
}

// Lock is TryLock that waits up to wait for the holder to finish, then
// returns an error matching sqlcoord.ErrLockTimeout. Waiters queue in the
// database (PostgreSQL's lock manager, InnoDB's lock queue): no polling. Cancelling ctx stops
// the wait (the driver then abandons the connection, so tx is gone).
// After ErrLockTimeout, tx is aborted on PostgreSQL (lock_timeout is an
// error) and must be rolled back; MySQL/MariaDB roll back the statement
// only.
//
// Granularity: PostgreSQL honours milliseconds (SET LOCAL lock_timeout,
// restored afterwards); MySQL/MariaDB only whole seconds, so wait is rounded
// up to the next second. wait == 0 behaves like TryLock.
func (c *Client[TTx]) Lock(ctx context.Context, tx TTx, name string, wait time.Duration) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lock.wait", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	if wait == 0 {
		return c.TryLock(ctx, tx, name)
	}
	if err := validDuration("lock wait", wait, time.Millisecond); err != nil {
		return err
	}
	if err := validName("lock", name); err != nil {
		return err
	}
	return c.lockResult(name, c.d.LockWait(ctx, c.tx.TxExecutor(tx), name, wait, &c.names))
}

func (c *Leases) lockResult(name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return errs.Errorf("coord: lock %q: %w", truncate(name), ErrLockRowMissing)
	}
	return errs.Errorf("coord: lock %q: %w", truncate(name), c.d.Classify(err))
}

// SetIdleTimeout bounds how long the server lets tx's session sit idle
// inside a transaction before ending the session — and so how long a
// frozen holder (SIGSTOP, GC pause, hung process) can keep its locks.
//
// Choose d longer than the longest legitimate pause inside the lock: a
// holder that waits longer than d on something else (a remote call made
// while holding the lock, a slow disk) loses its session, its lock and
// its transaction, which then cannot commit.
//
//   - PostgreSQL: idle_in_transaction_session_timeout, set for this
//     transaction only (SET LOCAL), millisecond resolution.
//   - MariaDB: idle_transaction_timeout; MySQL 8: wait_timeout (applies to
//     idle sessions in or out of a transaction). Whole seconds. Both are
//     session variables: in a pool that sqlcoord.Open made, the connection
//     resets the value to the server's default before it serves anyone
//     else. A pool you wrapped (WrapDB, sqlxdriver.Wrap) keeps it on the
//     connection for later transactions: there, set the timeout for every
//     connection in the DSN instead (mysql://…/db?idle_transaction_timeout=5).
//
// The same settings can be put in the DSN for every connection, e.g.
// postgres://…?idle_in_transaction_session_timeout=5000.
func (c *Client[TTx]) SetIdleTimeout(ctx context.Context, tx TTx, d time.Duration) error {
	if err := validDuration("idle timeout", d, time.Millisecond); err != nil {
		return err
	}
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	return c.wrap("set idle timeout", "", c.d.SetIdleTimeout(ctx, c.tx.TxExecutor(tx), ms))
}

// CleanupLocks deletes the coord_locks rows of lock names first used
// longer than age ago, batch rows per transaction (default 1,000), and
// returns how many it deleted. A name's next lock creates its row again,
// so a name in use costs at most one row, and one-off names (one per
// order, say) cost space only until the next cleanup.
//
// Safe while locks are held: on PostgreSQL the lock is an advisory lock
// on a hash of the name that needs no row (the row is only the console's
// name for it); on MySQL/MariaDB rows someone holds or waits for are
// skipped (SELECT … FOR UPDATE SKIP LOCKED at READ COMMITTED, so no gap
// lock blocks a new name). PostgreSQL refuses (ErrLockProtocol-like error
// 55000 from the database) while an older lock protocol is on: instances
// of schema 14 and earlier need the rows (see sqlcoord.SetLockProtocol).
func (c *Leases) CleanupLocks(ctx context.Context, age time.Duration, batch int) (int64, error) {
	if age < 0 {
		return 0, errs.Errorf("%w: cleanup age %v is negative", ErrInvalidTTL, age)
	}
	if batch <= 0 {
		batch = 1000
	}
	n, err := sqlutil.InBatches(ctx, c.drv, sqlutil.Pace(c.drv.CleanupPace()), batch, func(ctx context.Context, x dialects.Executor) (int64, error) {
		return c.d.LockCleanup(ctx, x, age, batch)
	})
	if n > 0 {
		c.names.Forget() // the next lock of a deleted name registers it again
	}
	if err != nil {
		return n, errs.Errorf("coord: cleanup locks: %w", err)
	}
	return n, nil
}
