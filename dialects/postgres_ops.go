package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// pgOps: PostgreSQL does most things in one statement (RETURNING); an
// error aborts the whole transaction, so anything that may fail on purpose
// inside the caller's transaction runs under a savepoint.
type pgOps struct{ q *Queries }

// bounded runs stmt in tx under a savepoint with lock_timeout set to
// timeout, then restores the transaction's own lock_timeout. Any failure
// rolls back to the savepoint, so tx stays usable (a plain error would
// abort the caller's whole transaction).
func (o pgOps) bounded(ctx context.Context, tx Executor, timeout time.Duration, stmt func() error) error {
	if _, err := tx.Exec(ctx, `SAVEPOINT coord_bounded`); err != nil {
		return err
	}
	var old, set string
	err := tx.QueryRow(ctx, o.q.LockWaitBegin, strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)).Scan(&old, &set)
	if err == nil {
		err = stmt()
	}
	if err == nil {
		err = tx.QueryRow(ctx, o.q.LockWaitEnd, old).Scan(&set)
	}
	if err != nil {
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT coord_bounded`); rerr != nil {
			return rerr
		}
		return err
	}
	_, err = tx.Exec(ctx, `RELEASE SAVEPOINT coord_bounded`)
	return err
}

// lockTry takes the advisory lock of name's hash without waiting: one
// statement, nothing written (a first use also registers the name for
// the console).
func (o pgOps) LockTry(ctx context.Context, tx Executor, name string, names *LockNames) error {
	return o.lock(ctx, tx, name, 0, names)
}

// lockWait is lockTry that waits up to wait (lock_timeout, restored
// afterwards; a timeout aborts tx, as documented on coord.Lock).
func (o pgOps) LockWait(ctx context.Context, tx Executor, name string, wait time.Duration, names *LockNames) error {
	return o.lock(ctx, tx, name, wait, names)
}

func (o pgOps) lock(ctx context.Context, tx Executor, name string, wait time.Duration, names *LockNames) error {
	known := names.known(name)
	var got string
	if wait == 0 {
		q := o.q.LockAdvTry
		if known {
			q = o.q.LockAdvTryKnown
		}
		if err := tx.QueryRow(ctx, q, name).Scan(&got); err != nil {
			return classifyPostgres(err)
		}
	} else {
		var old, set string
		if err := tx.QueryRow(ctx, o.q.LockWaitBegin, strconv.FormatInt(max(wait.Milliseconds(), 1), 10)).Scan(&old, &set); err != nil {
			return classifyPostgres(err)
		}
		q := o.q.LockAdvWait
		if known {
			q = o.q.LockAdvWaitKnown
		}
		if err := tx.QueryRow(ctx, q, name).Scan(&got); err != nil {
			return classifyPostgres(err)
		}
		if err := tx.QueryRow(ctx, o.q.LockWaitEnd, old).Scan(&set); err != nil {
			return classifyPostgres(err)
		}
	}
	switch got {
	case "ro":
		return errReadOnlyLock
	case "snap":
		return errLockIsolation
	case "held":
		return errLockHeld
	case "ok":
		if !known {
			names.add(name)
		}
		return nil
	case "new":
		// Locked; the row is inserted in tx (after the lock was granted,
		// so no other transaction can be inserting it) and only seen
		// once committed: names learns it on a later lock.
		if _, err := tx.Exec(ctx, o.q.LockRegister, name); err != nil {
			return classifyPostgres(err)
		}
		return nil
	case "legacy":
		return o.lockLegacy(ctx, tx, name, wait)
	}
	return fmt.Errorf("lock %q: unexpected lock statement result %q", name, got)
}

// errReadOnlyLock: a lock asked for in a read-only transaction. A
// standby grants advisory locks that its primary knows nothing of, so
// they are refused there as a row lock would be.
var errReadOnlyLock = &Error{Kind: ErrReadOnly, Code: "25006", Err: errors.New("cannot lock in a read-only transaction (a standby, or transaction_read_only)")}

// errLockIsolation: a lock asked for where the lock statement would fix
// the transaction's snapshot (see ErrLockIsolation).
var errLockIsolation = &Error{Kind: ErrLockIsolation}

// lockLegacy locks name during a rolling upgrade: besides the hash lock,
// the row lock (instances before schema 14 may run) and/or the advisory
// lock on the name's permanent id (schema 14 instances may run), as
// coord_lock_protocol says. Such instances need the row; a missing one is
// created in tx (invisible to others until tx commits).
func (o pgOps) lockLegacy(ctx context.Context, tx Executor, name string, wait time.Duration) error {
	for i := 0; ; i++ {
		var row sql.NullString
		var id sql.NullInt64
		var rowLocks, idLocks bool
		if err := tx.QueryRow(ctx, o.q.LockLegacyRead, name).Scan(&row, &id, &rowLocks, &idLocks); err != nil {
			return classifyPostgres(err)
		}
		if row.Valid && (id.Valid || !idLocks) {
			return o.lockBoth(ctx, tx, name, id.Int64, rowLocks, idLocks, wait)
		}
		if i > 0 {
			return fmt.Errorf("lock row %q: %w", name, sql.ErrNoRows) // created by another transaction, then gone
		}
		if err := o.lockCreate(ctx, tx, name, max(wait, time.Millisecond), row.Valid); err != nil {
			if wait == 0 && errors.Is(classifyPostgres(err), ErrLockTimeout) {
				return errLockHeld // another transaction is creating it
			}
			return classifyPostgres(err)
		}
	}
}

// lockCreate creates the lock row (or gives a registered row its id)
// inside tx, waiting at most timeout for a concurrent creator (see
// bounded).
func (o pgOps) lockCreate(ctx context.Context, tx Executor, name string, timeout time.Duration, exists bool) error {
	return o.bounded(ctx, tx, timeout, func() error {
		if exists {
			_, err := tx.Exec(ctx, o.q.LockAssignID, name)
			return err
		}
		var got string
		if err := tx.QueryRow(ctx, o.q.LockCreate, name).Scan(&got); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return nil
	})
}

// lockBoth takes, under a savepoint, the locks older instances take (the
// row lock, the id lock) and then the hash lock: if any is refused, all
// are released and tx stays usable. wait 0: none waits.
func (o pgOps) lockBoth(ctx context.Context, tx Executor, name string, id int64, rowLocks, idLocks bool, wait time.Duration) error {
	try := func(q string, arg any) error {
		if wait > 0 {
			var got string
			return tx.QueryRow(ctx, q, arg).Scan(&got)
		}
		var ok bool
		if err := tx.QueryRow(ctx, q, arg).Scan(&ok); err != nil || ok {
			return err
		}
		return errLockHeld
	}
	err := o.bounded(ctx, tx, max(wait, time.Millisecond), func() error {
		if rowLocks {
			var got string
			q := o.q.LockWait
			if wait == 0 {
				q = o.q.LockNowait
			}
			if err := tx.QueryRow(ctx, q, name).Scan(&got); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return errLockHeld
				}
				return err
			}
		}
		if idLocks {
			q := o.q.LockAdvWaitID
			if wait == 0 {
				q = o.q.LockAdvTryID
			}
			if err := try(q, id); err != nil {
				return err
			}
		}
		q := o.q.LockHashWait
		if wait == 0 {
			q = o.q.LockHashTry
		}
		return try(q, name)
	})
	return classifyPostgres(err)
}

// outboxCleanup: one DELETE of the batch it picks with SKIP LOCKED.
func (o pgOps) OutboxCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	return x.Exec(ctx, o.q.OutboxCleanup, age.Microseconds(), batch)
}

// lockCleanup deletes the rows of names created longer ago than age, at
// most batch, in tx (READ COMMITTED). The hash lock needs no row; the
// database refuses while an older protocol (which needs them) is on.
func (o pgOps) LockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error) {
	return tx.Exec(ctx, o.q.LockCleanup, age.Microseconds(), batch)
}

func (o pgOps) TxIdleTimeout(ctx context.Context, tx Executor, ms int64) (bool, error) {
	return true, o.SetIdleTimeout(ctx, tx, ms)
}

func (o pgOps) SetIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	var s string
	return tx.QueryRow(ctx, o.q.IdleTxTimeoutSet, strconv.FormatInt(ms, 10)).Scan(&s)
}

func (o pgOps) LeaseAcquire(ctx context.Context, pool Executor, l LeaseSlot) (LeaseRow, error) {
	r := LeaseRow{Owner: l.Owner} // a row returned is the caller's
	err := pool.QueryRow(ctx, o.q.LeaseAcquire, l.Name, l.Owner, l.TTLMicros, l.HWM, l.Queue, l.Ticket).Scan(&r.Token, &r.ExpiresAt, &r.Epoch)
	r.TicketDropped = err == nil && l.Ticket != 0
	if errors.Is(err, sql.ErrNoRows) {
		// held by a live owner, or promised to the queue's head: the
		// conditional upsert changed nothing
		err = pool.QueryRow(ctx, o.q.LeaseRead, l.Name).Scan(&r.Owner, &r.Token, &r.ExpiresAt, &r.Queued)
		if err == nil && r.Owner == l.Owner {
			r.Owner = "" // ours once, expired: not the caller's now
		}
	}
	return r, err
}

func (o pgOps) LeaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttl, hwm int64) (Renewal, error) {
	var r Renewal
	err := pool.QueryRow(ctx, o.q.LeaseRenew, ttl, name, owner, token, hwm).Scan(&r.ExpiresAt, &r.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	r.OK = err == nil
	return r, err
}

func (o pgOps) LeaseRelease(ctx context.Context, pool Executor, l LeaseSlot) (bool, error) {
	n, err := pool.Exec(ctx, o.q.LeaseRelease, l.Name, l.Owner, l.Token, LeaseQueue(l.Name), l.Queue)
	return n > 0, err
}

func (o pgOps) LeaseReleaseWaking(ctx context.Context, pool Executor, l LeaseSlot, channel string) (bool, error) {
	n, err := pool.Exec(ctx, o.q.LeaseReleaseNotify, l.Name, l.Owner, l.Token, channel, l.Queue, l.Observed)
	return n > 0, err
}

func (o pgOps) FenceAdvance(ctx context.Context, tx Executor, resource string, token, hwm int64) (bool, error) {
	n, err := tx.Exec(ctx, o.q.FenceAdvanceChecked, resource, token, hwm) // one row when accepted
	return n > 0, err
}

func (o pgOps) FencedUpdate(ctx context.Context, tx Executor, u FencedWrite) (bool, error) {
	n, err := tx.Exec(ctx, u.Query, u.Args...) // PostgreSQL counts matched rows
	return n > 0, err
}

func (o pgOps) IdemInsert(ctx context.Context, tx Executor, k IdemKey) (IdemResult, error) {
	q := o.q.IdemInsert
	if k.NoWait {
		q = o.q.IdemInsertNowait // run under bounded's lock timeout
	}
	return o.idemClaim(ctx, tx, k, o.q.IdemInsertPlain, q, k.Scope, k.Key, k.Fingerprint, k.LockMicros)
}

func (o pgOps) IdemRecord(ctx context.Context, tx Executor, k IdemKey, response []byte) (IdemResult, error) {
	k.NoWait = false
	return o.idemClaim(ctx, tx, k, o.q.IdemInsertDonePlain, o.q.IdemInsertDone, k.Scope, k.Key, k.Fingerprint, response)
}

// idemClaim inserts a key: the one row of a plain table (plain), or, when
// that inserted nothing (the key exists, or the table is partitioned by
// period) or the caller expects a partitioned table (k.Table), its claim
// (pgIdemClaim): Inserted when every row the key should have went in.
// Rows that went in beside a period the key already held are deleted
// again, and the key reported as existing. The claim's count of the rows
// the key should have tells the table's layout: one on a plain table.
func (o pgOps) idemClaim(ctx context.Context, tx Executor, k IdemKey, plain, q string, args ...any) (IdemResult, error) {
	var want, got int
	var periods string
	claim := func() error {
		if k.Table != KeyTablePartitioned {
			n, err := tx.Exec(ctx, plain, args...)
			if err != nil || n == 1 {
				want, got = 1, int(n)
				return err
			}
		}
		return tx.QueryRow(ctx, q, args...).Scan(&want, &got, &periods)
	}
	var err error
	if k.NoWait {
		err = o.bounded(ctx, tx, time.Millisecond, claim)
	} else {
		err = claim()
	}
	if err != nil {
		return IdemResult{}, err
	}
	r := IdemResult{Inserted: got == want, Table: KeyTablePlain}
	if want > 1 {
		r.Table = KeyTablePartitioned
	}
	if got > 0 && got < want {
		_, err = tx.Exec(ctx, o.q.IdemUndo, args[0], args[1], periods)
	}
	return r, err
}

func (o pgOps) SegmentAdvance(ctx context.Context, tx Executor, tag string, step int, hwm int64) (Issued, error) {
	var r Issued
	err := tx.QueryRow(ctx, o.q.SegmentAdvance, step, step, tag, hwm).Scan(&r.Value, &r.Epoch)
	return r, err
}

func (o pgOps) JobClaim(ctx context.Context, pool Executor, j JobSlot, hwm int64) (Issued, bool, error) {
	var r Issued
	err := pool.QueryRow(ctx, o.q.JobClaim, j.Job, j.Fire, j.Shard, j.Total, j.Status, j.Owner, hwm, j.Reason).Scan(&r.Value, &r.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

func (o pgOps) JobTakeover(ctx context.Context, pool Executor, j JobSlot, attempt, grace, hwm int64) (Issued, bool, error) {
	var r Issued
	err := pool.QueryRow(ctx, o.q.JobTakeover, j.Owner, j.Job, j.Fire, j.Shard, attempt, grace, hwm).Scan(&r.Value, &r.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

func (o pgOps) WorkerEpochReady(ctx context.Context, pool Executor, wait, hwm int64) (EpochGrace, error) {
	var g EpochGrace
	var left int64
	err := pool.QueryRow(ctx, o.q.WorkerEpochReady, wait, hwm).Scan(&g.Ready, &g.Epoch, &left)
	g.Left = time.Duration(left) * time.Microsecond
	return g, err
}

func (o pgOps) OutboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
	q := o.q.OutboxPublishedBatch
	if deleteRows {
		q = o.q.OutboxDeleteBatch
	}
	_, err := tx.Exec(ctx, q, ids)
	return err
}

func (o pgOps) EndSession(ctx context.Context, pool Executor, id, start int64) error {
	_, err := pool.Exec(ctx, o.q.SessionEnd, id, start)
	return err
}

func (o pgOps) EpochAdvance(ctx context.Context, x Executor) (int64, error) {
	var b int64
	err := x.QueryRow(ctx, o.q.EpochAdvance).Scan(&b)
	return b, err
}

func (o pgOps) EpochCheck(context.Context, Executor, int64) (bool, error) { return false, nil }

func (o pgOps) UuidValue(u [16]byte) any { return uuid.UUID(u).String() }
func (o pgOps) UuidColumnType() string   { return "uuid" }

func (o pgOps) JobFail(ctx context.Context, pool Executor, f JobFailure) (int64, error) {
	return pool.Exec(ctx, o.q.JobFail, f.Error, f.Permanent, f.MaxAttempts, f.BackoffMicros,
		f.Slot.Job, f.Slot.Fire, f.Slot.Shard, f.Attempt)
}

func (o pgOps) SagaRecord(ctx context.Context, x Executor, r SagaRecord) (bool, error) {
	q := o.q.Saga.RecordRelaxed
	if r.Durable {
		q = o.q.Saga.Record
	}
	var n int
	err := x.QueryRow(ctx, q, r.Status, r.Step, r.Tries, r.Reason, r.Err, r.Stuck, r.DueMicros, r.Keep, r.GID, r.Claim,
		r.Idx, r.BranchStatus, r.BranchTries, r.BranchErr).Scan(&n)
	return n == 1, err
}

func (o pgOps) SagaClaim(ctx context.Context, x Executor, c SagaClaim) ([]SagaClaimed, error) {
	if c.GID != "" {
		return scanSagaClaims(x.Query(ctx, o.q.Saga.ClaimGID, c.Token, c.Owner, c.LeaseMicros, c.GID))
	}
	return scanSagaClaims(x.Query(ctx, o.q.Saga.Claim, c.Token, c.Owner, c.LeaseMicros, c.Max))
}

// sagaCleanup: one DELETE of the batch it picks with SKIP LOCKED; the
// branches go by the foreign key's cascade.
func (o pgOps) SagaCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	return x.Exec(ctx, o.q.Saga.Cleanup, age.Microseconds(), batch)
}
