package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// ErrLockRowMissing: the coord_locks row disappeared between creation and
// locking (someone deleted it). Retry the transaction.
var ErrLockRowMissing = errors.New("coord: lock row missing (deleted concurrently); retry")

// TryLock locks name for the rest of tx's life, or returns an error that
// matches dialects.ErrLocked at once when another transaction holds it.
// Commit or rollback releases the lock; so does the end of the holder's
// session (crash, kill -9, cut connection), which the server notices at
// once. A holder that is alive but frozen keeps the lock until a server-side
// timeout ends its session: see SetIdleTimeout.
//
// PostgreSQL: pg_try_advisory_xact_lock on (1936813155, the name's id),
// one statement, nothing written — a transaction that only locks commits
// without flushing WAL. Each name's id is assigned once in coord_locks and
// never changes (the database refuses to delete or renumber lock rows), so
// two names never share a lock and a name never has two. During a rolling
// upgrade from a schema before version 14 the row is locked too (see
// sqlcoord.SetLockProtocol). MySQL/MariaDB: SELECT … FOR UPDATE NOWAIT of
// the name's row (InnoDB keeps row locks in memory).
//
// After ErrLocked tx is still usable on both dialects (PostgreSQL's try
// does not raise and creates missing rows under a savepoint, so no
// statement aborts the transaction; MySQL/MariaDB's NOWAIT error rolls
// back the statement only): the caller may go on without the lock, try
// another name, or commit.
//
// Everything happens in tx — the lock row is created inside it on first use
// (PostgreSQL: INSERT … ON CONFLICT DO NOTHING under a savepoint and a
// short lock_timeout; MySQL: INSERT IGNORE with a bounded lock wait after a
// consistent read, never a locking read of a missing key, which would take
// a gap lock). No second pooled connection is ever needed, so it works with
// a pool of one connection and behind PgBouncer.
func (c *Client[TTx]) TryLock(ctx context.Context, tx TTx, name string) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lock.try", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	if err := validName("lock", name); err != nil {
		return err
	}
	return c.lockResult(name, c.d.LockTry(ctx, c.drv.TxExecutor(tx), name))
}

// Lock is TryLock that waits up to wait for the holder to finish, then
// returns an error matching dialects.ErrLockTimeout. Cancelling ctx stops
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
	return c.lockResult(name, c.d.LockWait(ctx, c.drv.TxExecutor(tx), name, wait))
}

func (c *Client[TTx]) lockResult(name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("coord: lock %q: %w", truncate(name), ErrLockRowMissing)
	}
	return fmt.Errorf("coord: lock %q: %w", truncate(name), c.d.Classify(err))
}

// SetIdleTimeout bounds how long the server lets tx's session sit idle
// inside a transaction before ending the session — and so how long a
// frozen holder (SIGSTOP, GC pause, hung process) can keep its row locks.
//
//   - PostgreSQL: idle_in_transaction_session_timeout, set for this
//     transaction only (SET LOCAL), millisecond resolution.
//   - MariaDB: idle_transaction_timeout for the session (whole seconds;
//     it stays set on the pooled connection).
//   - MySQL 8: wait_timeout for the session (whole seconds; applies to idle
//     sessions in or out of a transaction).
//
// The same settings can be put in the DSN for every connection, e.g.
// postgres://…?idle_in_transaction_session_timeout=5000 or
// mysql://…/db?idle_transaction_timeout=5.
func (c *Client[TTx]) SetIdleTimeout(ctx context.Context, tx TTx, d time.Duration) error {
	if err := validDuration("idle timeout", d, time.Millisecond); err != nil {
		return err
	}
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	return c.wrap("set idle timeout", "", c.d.SetIdleTimeout(ctx, c.drv.TxExecutor(tx), ms))
}
