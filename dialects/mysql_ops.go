package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// mysqlOps: MySQL/MariaDB have no RETURNING on UPDATE or upsert, so a
// statement is followed by a read; a failed statement rolls back only
// itself, so no savepoints. MariaDB and MySQL 8 differ only in statement
// text (wait bounds, idle timeout), kept in their Queries.
type mysqlOps struct{ q *Queries }

func secs(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

// lockRow locks name's row in tx with q, the one locking statement that
// creates the row or waits for its lock (see Queries.LockNowait): no
// statement before it, so nothing fixes the transaction's read view before
// the lock is granted, whatever the isolation level.
func (o mysqlOps) lockRow(ctx context.Context, tx Executor, q, name string) error {
	_, err := tx.Exec(ctx, q, name)
	return classifyMySQL(err)
}

func (o mysqlOps) lockTry(ctx context.Context, tx Executor, name string) error {
	err := o.lockRow(ctx, tx, o.q.LockNowait, name)
	if errors.Is(err, ErrLockTimeout) { // MariaDB reports NOWAIT as 1205, MySQL 8 waited its 1 s
		var e *Error
		errors.As(err, &e)
		return &Error{Kind: ErrLocked, Code: e.Code, Err: e.Err}
	}
	return err
}

func (o mysqlOps) lockWait(ctx context.Context, tx Executor, name string, wait time.Duration) error {
	return o.lockRow(ctx, tx, fmt.Sprintf(o.q.LockWait, secs(wait)), name)
}

func (o mysqlOps) lockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error) {
	rows, err := tx.Query(ctx, o.q.LockCleanup, age.Microseconds(), batch)
	if err != nil {
		return 0, err
	}
	var names []any
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, err
		}
		names = append(names, n)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, nil
	}
	return tx.Exec(ctx, "DELETE FROM coord_locks WHERE name IN ("+strings.TrimSuffix(strings.Repeat("?,", len(names)), ",")+")", names...)
}

func (o mysqlOps) txIdleTimeout(context.Context, Executor, int64) (bool, error) { return false, nil }

func (o mysqlOps) setIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	_, err := tx.Exec(ctx, o.q.IdleTxTimeoutSet, ms)
	return err
}

// Two autocommit statements, never one transaction around both: a holder
// frozen between them must not keep the row locked. Between them only an
// expiry can change the owner, and then the lease is reported held, which
// is what it is by then.
func (o mysqlOps) leaseAcquire(ctx context.Context, pool Executor, name, owner string, ttl, _ int64) (LeaseRow, error) {
	var r LeaseRow
	if o.q.LeaseAcquireReturning != "" { // MariaDB: one round trip
		err := pool.QueryRow(ctx, o.q.LeaseAcquireReturning, name, owner, ttl).Scan(&r.Owner, &r.Token, &r.ExpiresAt)
		return r, err
	}
	if _, err := pool.Exec(ctx, o.q.LeaseAcquire, name, owner, ttl); err != nil {
		return r, err
	}
	err := pool.QueryRow(ctx, o.q.LeaseRead, name).Scan(&r.Owner, &r.Token, &r.ExpiresAt)
	return r, err
}

func (o mysqlOps) leaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttl, _ int64) (Renewal, error) {
	var r Renewal
	// renewed_at changes on every renewal, so the count is the same with
	// or without clientFoundRows
	n, err := pool.Exec(ctx, o.q.LeaseRenew, ttl, name, owner, token)
	if err != nil || n == 0 {
		return r, err
	}
	err = pool.QueryRow(ctx, o.q.LeaseExpiry, name, owner, token).Scan(&r.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	r.OK = err == nil
	return r, err
}

func (o mysqlOps) fenceAdvance(ctx context.Context, tx Executor, resource string, token, _ int64) (bool, error) {
	if o.q.FenceAdvanceReturning != "" { // MariaDB: one round trip
		var fence int64
		if err := tx.QueryRow(ctx, o.q.FenceAdvanceReturning, resource, token).Scan(&fence); err != nil {
			return false, err
		}
		return fence == token, nil
	}
	if _, err := tx.Exec(ctx, o.q.FenceAdvance, resource, token); err != nil {
		return false, err
	}
	var fence int64
	if err := tx.QueryRow(ctx, o.q.FenceRead, resource).Scan(&fence); err != nil {
		return false, err
	}
	return fence == token, nil
}

// fencedUpdate does not rely on clientFoundRows: an update that changed
// no value reports 0 rows, so 0 is checked with a locking read of the row's
// fence (the update's lock is already held).
func (o mysqlOps) fencedUpdate(ctx context.Context, tx Executor, u fencedUpdate) (bool, error) {
	n, err := tx.Exec(ctx, u.q, u.args...)
	if err != nil || n > 0 {
		return n > 0, err
	}
	var fence int64
	err = tx.QueryRow(ctx, u.check, u.key).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && fence == u.token, err
}

func (o mysqlOps) idemInsert(ctx context.Context, tx Executor, nowait bool, scope, key string, fp []byte, lock int64) (bool, error) {
	q := o.q.IdemInsert
	if nowait {
		q = o.q.IdemInsertNowait
	}
	n, err := tx.Exec(ctx, q, scope, key, fp, lock)
	return n == 1, err
}

func (o mysqlOps) jobClaim(ctx context.Context, pool Executor, j JobSlot, _ int64) (Issued, bool, error) {
	n, err := pool.Exec(ctx, o.q.JobClaim, j.Job, j.Fire, j.Shard, j.Total, j.Status, j.Owner)
	return Issued{Value: 1}, err == nil && n > 0, err
}

func (o mysqlOps) jobTakeover(ctx context.Context, pool Executor, j JobSlot, attempt, grace, _ int64) (Issued, bool, error) {
	n, err := pool.Exec(ctx, o.q.JobTakeover, j.Owner, j.Job, j.Fire, j.Shard, attempt, grace)
	return Issued{Value: attempt + 1}, err == nil && n == 1, err
}

func (o mysqlOps) workerEpochReady(context.Context, Executor, int64, int64) (EpochGrace, error) {
	return EpochGrace{Ready: true}, nil
}

func (o mysqlOps) outboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
	tmpl := o.q.OutboxPublishedBatch
	if deleteRows {
		tmpl = o.q.OutboxDeleteBatch
	}
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		q := fmt.Sprintf(tmpl, strings.TrimSuffix(strings.Repeat("?,", n), ","), n)
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (o mysqlOps) segmentAdvance(ctx context.Context, tx Executor, tag string, step int, _ int64) (Issued, error) {
	var r Issued
	if _, err := tx.Exec(ctx, o.q.SegmentAdvance, step, step, tag); err != nil {
		return r, err
	}
	err := tx.QueryRow(ctx, o.q.SegmentRead, tag).Scan(&r.Value) // our own update is visible
	return r, err
}

// KILL is not a preparable statement: the id, an integer read from the
// server, is formatted into the text.
func (o mysqlOps) endSession(ctx context.Context, pool Executor, id, _ int64) error {
	_, err := pool.Exec(ctx, fmt.Sprintf(o.q.SessionEnd, id))
	if errors.Is(classifyMySQL(err), ErrNoSuchSession) {
		return nil
	}
	return err
}

// BINARY(16), bytes in order: byte order equals time order for UUIDv7.
func (o mysqlOps) uuidValue(u [16]byte) any {
	b := make([]byte, 16)
	copy(b, u[:])
	return b
}
func (o mysqlOps) uuidColumnType() string { return "BINARY(16)" }
