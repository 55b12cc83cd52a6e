package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
)

// maxKnown bounds the cache of lock rows known to exist.
const maxKnown = 100_000

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
// After ErrLocked tx is still usable on both dialects (PostgreSQL asks
// with FOR UPDATE SKIP LOCKED, so no statement fails and the transaction
// is not aborted; MySQL/MariaDB's NOWAIT error rolls back the statement
// only): the caller may go on without the lock, try another name, or
// commit.
//
// The lock row is created on first use with an autocommit INSERT … ON
// CONFLICT DO NOTHING / INSERT IGNORE through the Client's own pool, before
// tx touches it, so first uses never race or deadlock (on MySQL, locking a
// missing row under REPEATABLE READ would take a gap lock).
func (c *Client) TryLock(ctx context.Context, tx sqlcoord.Querier, name string) error {
	if err := c.ensureLock(ctx, name); err != nil {
		return err
	}
	var got string
	err := tx.QueryRowContext(ctx, c.q.LockNowait, name).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		// Skipped because locked, or deleted meanwhile: ask outside tx
		// (a read in tx could see its old snapshot on MySQL).
		var one int
		switch xerr := c.db.QueryRowContext(ctx, c.q.LockExists, name).Scan(&one); {
		case xerr == nil:
			return fmt.Errorf("coord: lock %q: %w", truncate(name), &dialects.Error{Kind: dialects.ErrLocked, Err: errHeld})
		case !errors.Is(xerr, sql.ErrNoRows):
			return c.wrap("lock", name, xerr)
		}
	}
	return c.lockResult(name, err, true)
}

// errHeld is the cause under ErrLocked when the lock statement skipped
// the row rather than failing.
var errHeld = errors.New("row skipped by FOR UPDATE SKIP LOCKED")

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
func (c *Client) Lock(ctx context.Context, tx sqlcoord.Querier, name string, wait time.Duration) error {
	if wait == 0 {
		return c.TryLock(ctx, tx, name)
	}
	if err := validDuration("lock wait", wait, time.Millisecond); err != nil {
		return err
	}
	if err := c.ensureLock(ctx, name); err != nil {
		return err
	}
	var got string
	if c.q.LockWaitTemplate {
		secs := int(math.Ceil(wait.Seconds()))
		err := tx.QueryRowContext(ctx, fmt.Sprintf(c.q.LockWait, secs), name).Scan(&got)
		return c.lockResult(name, err, false)
	}
	var old, set string
	ms := strconv.FormatInt(int64(math.Ceil(float64(wait)/float64(time.Millisecond))), 10)
	if err := tx.QueryRowContext(ctx, c.q.LockWaitBegin, ms).Scan(&old, &set); err != nil {
		return c.wrap("lock", name, err)
	}
	err := tx.QueryRowContext(ctx, c.q.LockWait, name).Scan(&got)
	if err := c.lockResult(name, err, false); err != nil {
		return err // the transaction is aborted; SET LOCAL ends with it
	}
	if err := tx.QueryRowContext(ctx, c.q.LockWaitEnd, old).Scan(&set); err != nil {
		return c.wrap("lock", name, err)
	}
	return nil
}

func (c *Client) lockResult(name string, err error, nowait bool) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		c.known.Delete(name)
		return fmt.Errorf("coord: lock %q: %w", truncate(name), ErrLockRowMissing)
	}
	cerr := c.d.Classify(err)
	var de *dialects.Error
	if nowait && errors.As(cerr, &de) && errors.Is(cerr, dialects.ErrLockTimeout) {
		// MariaDB reports a NOWAIT failure with the lock-wait-timeout code.
		cerr = &dialects.Error{Kind: dialects.ErrLocked, Code: de.Code, Err: de.Err}
	}
	return fmt.Errorf("coord: lock %q: %w", truncate(name), cerr)
}

// ensureLock makes sure the coord_locks row exists, outside the caller's
// transaction. A plain read first: on MySQL, INSERT IGNORE of an existing
// row takes a shared lock on it and would wait for its holder.
func (c *Client) ensureLock(ctx context.Context, name string) error {
	if err := validName("lock", name); err != nil {
		return err
	}
	if _, ok := c.known.Load(name); ok {
		return nil
	}
	var one int
	err := c.db.QueryRowContext(ctx, c.q.LockExists, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = c.db.ExecContext(ctx, c.q.LockCreate, name)
		if errors.Is(c.d.Classify(err), dialects.ErrLockTimeout) {
			err = nil // MySQL: the row appeared and is locked, so it exists
		}
	}
	if err != nil {
		return c.wrap("create lock", name, err)
	}
	c.mu.Lock()
	if c.nKnow < maxKnown {
		c.known.Store(name, struct{}{})
		c.nKnow++
	}
	c.mu.Unlock()
	return nil
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
func (c *Client) SetIdleTimeout(ctx context.Context, tx sqlcoord.Querier, d time.Duration) error {
	if err := validDuration("idle timeout", d, time.Millisecond); err != nil {
		return err
	}
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	var err error
	if c.d.Family() == "postgres" {
		q := c.q.IdleTxTimeoutSet
		var s string
		err = tx.QueryRowContext(ctx, q, strconv.FormatInt(ms, 10)).Scan(&s)
	} else {
		_, err = tx.ExecContext(ctx, c.q.IdleTxTimeoutSet, ms)
	}
	return c.wrap("set idle timeout", "", err)
}
