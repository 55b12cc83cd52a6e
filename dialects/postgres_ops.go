package dialects

import (
	"context"
	"database/sql"
	"errors"
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

// lockCreate creates the lock row inside tx, waiting at most timeout for a
// concurrent creator (see bounded). inserted: we created it, and so hold it
// until tx ends (no one else can see it before we commit).
func (o pgOps) lockCreate(ctx context.Context, tx Executor, name string, timeout time.Duration) (inserted bool, err error) {
	err = o.bounded(ctx, tx, timeout, func() error {
		var got string
		err := tx.QueryRow(ctx, o.q.LockCreate, name).Scan(&got)
		inserted = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil // the row exists
		}
		return err
	})
	return inserted && err == nil, err
}

func (o pgOps) lockTry(ctx context.Context, tx Executor, name string) error {
	var got string
	err := tx.QueryRow(ctx, o.q.LockNowait, name).Scan(&got)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return classifyPostgres(err)
	}
	// Skipped because held, or missing. A plain read in tx tells which
	// (READ COMMITTED sees the latest row; an older snapshot sends us to
	// the create path, which finds the row there).
	var one int
	switch err := tx.QueryRow(ctx, o.q.LockExists, name).Scan(&one); {
	case err == nil:
		return &Error{Kind: ErrLocked, Err: errHeld}
	case !errors.Is(err, sql.ErrNoRows):
		return classifyPostgres(err)
	}
	inserted, err := o.lockCreate(ctx, tx, name, time.Millisecond)
	if err != nil {
		if errors.Is(classifyPostgres(err), ErrLockTimeout) {
			return &Error{Kind: ErrLocked, Err: errHeld} // another transaction is creating it
		}
		return classifyPostgres(err)
	}
	if inserted {
		return nil
	}
	err = tx.QueryRow(ctx, o.q.LockNowait, name).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return &Error{Kind: ErrLocked, Err: errHeld}
	}
	return classifyPostgres(err)
}

func (o pgOps) lockWait(ctx context.Context, tx Executor, name string, wait time.Duration) error {
	var one int
	err := tx.QueryRow(ctx, o.q.LockExists, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		inserted, cerr := o.lockCreate(ctx, tx, name, wait)
		if cerr != nil || inserted {
			return classifyPostgres(cerr)
		}
	} else if err != nil {
		return classifyPostgres(err)
	}
	var old, set string
	if err := tx.QueryRow(ctx, o.q.LockWaitBegin, strconv.FormatInt(max(wait.Milliseconds(), 1), 10)).Scan(&old, &set); err != nil {
		return classifyPostgres(err)
	}
	var got string
	if err := tx.QueryRow(ctx, o.q.LockWait, name).Scan(&got); err != nil {
		return classifyPostgres(err) // lock_timeout aborts the transaction (documented)
	}
	return classifyPostgres(tx.QueryRow(ctx, o.q.LockWaitEnd, old).Scan(&set))
}

func (o pgOps) setIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	var s string
	return tx.QueryRow(ctx, o.q.IdleTxTimeoutSet, strconv.FormatInt(ms, 10)).Scan(&s)
}

func (o pgOps) leaseAcquire(ctx context.Context, pool Executor, name, owner string, ttl int64) (LeaseRow, error) {
	var r LeaseRow
	err := pool.QueryRow(ctx, o.q.LeaseAcquire, name, owner, ttl).Scan(&r.Owner, &r.Token, &r.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		// held by a live owner: the conditional upsert changed nothing
		err = pool.QueryRow(ctx, o.q.LeaseRead, name).Scan(&r.Owner, &r.Token, &r.ExpiresAt)
	}
	return r, err
}

func (o pgOps) leaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttl int64) (time.Time, bool, error) {
	var exp time.Time
	err := pool.QueryRow(ctx, o.q.LeaseRenew, ttl, name, owner, token).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return exp, false, nil
	}
	return exp, err == nil, err
}

func (o pgOps) fenceAdvance(ctx context.Context, tx Executor, resource string, token int64) (bool, error) {
	var fence int64
	err := tx.QueryRow(ctx, o.q.FenceAdvance, resource, token).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (o pgOps) fencedUpdate(ctx context.Context, tx Executor, u fencedUpdate) (bool, error) {
	n, err := tx.Exec(ctx, u.q, u.args...) // PostgreSQL counts matched rows
	return n > 0, err
}

func (o pgOps) idemInsert(ctx context.Context, tx Executor, nowait bool, scope, key string, fp []byte, lock int64) (bool, error) {
	if !nowait {
		n, err := tx.Exec(ctx, o.q.IdemInsert, scope, key, fp, lock)
		return n == 1, err
	}
	var n int64
	err := o.bounded(ctx, tx, time.Millisecond, func() error {
		var err error
		n, err = tx.Exec(ctx, o.q.IdemInsertNowait, scope, key, fp, lock)
		return err
	})
	return n == 1 && err == nil, err
}

func (o pgOps) segmentAdvance(ctx context.Context, tx Executor, tag string, step int) (int64, error) {
	var maxID int64
	err := tx.QueryRow(ctx, o.q.SegmentAdvance, step, step, tag).Scan(&maxID)
	return maxID, err
}

func (o pgOps) jobClaim(ctx context.Context, pool Executor, job string, fire time.Time, shard, total int, status, owner string) (int64, bool, error) {
	var attempt int64
	err := pool.QueryRow(ctx, o.q.JobClaim, job, fire, shard, total, status, owner).Scan(&attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return attempt, err == nil, err
}

func (o pgOps) jobTakeover(ctx context.Context, pool Executor, owner, job string, fire time.Time, shard int, attempt, grace int64) (int64, bool, error) {
	var next int64
	err := pool.QueryRow(ctx, o.q.JobTakeover, owner, job, fire, shard, attempt, grace).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return next, err == nil, err
}

func (o pgOps) outboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
	q := o.q.OutboxPublishedBatch
	if deleteRows {
		q = o.q.OutboxDeleteBatch
	}
	_, err := tx.Exec(ctx, q, ids)
	return err
}

func (o pgOps) endSession(ctx context.Context, pool Executor, id, start int64) error {
	_, err := pool.Exec(ctx, o.q.SessionEnd, id, start)
	return err
}

func (o pgOps) uuidValue(u [16]byte) any { return uuid.UUID(u).String() }
func (o pgOps) uuidColumnType() string   { return "uuid" }
