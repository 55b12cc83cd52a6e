package dialects

import (
	"context"
	"errors"
	"time"
)

// operations are the statements whose shape differs between databases:
// what PostgreSQL does in one statement MySQL needs two for, what one
// server lets a transaction survive the other aborts it for. Each dialect
// implements them in its own file (postgres_ops.go, mysql_ops.go; MariaDB
// embeds MySQL and overrides what differs), so callers in coord, ids,
// jobs, txn and outbox never branch on the database.
type operations interface {
	lockTry(ctx context.Context, tx Executor, name string) error
	lockWait(ctx context.Context, tx Executor, name string, wait time.Duration) error
	lockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error)
	setIdleTimeout(ctx context.Context, tx Executor, ms int64) error
	txIdleTimeout(ctx context.Context, tx Executor, ms int64) (bool, error)
	leaseAcquire(ctx context.Context, pool Executor, name, owner string, ttlMicros int64) (LeaseRow, error)
	leaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttlMicros int64) (time.Time, bool, error)
	fenceAdvance(ctx context.Context, tx Executor, resource string, token int64) (bool, error)
	fencedUpdate(ctx context.Context, tx Executor, u fencedUpdate) (bool, error)
	idemInsert(ctx context.Context, tx Executor, nowait bool, scope, key string, fp []byte, lockMicros int64) (bool, error)
	segmentAdvance(ctx context.Context, tx Executor, tag string, step int) (int64, error)
	jobClaim(ctx context.Context, pool Executor, job string, fire time.Time, shard, total int, status, owner string) (int64, bool, error)
	jobTakeover(ctx context.Context, pool Executor, owner, job string, fire time.Time, shard int, attempt, graceMicros int64) (int64, bool, error)
	outboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error
	endSession(ctx context.Context, pool Executor, id, start int64) error
	uuidValue(u [16]byte) any
	uuidColumnType() string
}

// LeaseRow is a coord_leases row as an acquire left it.
type LeaseRow struct {
	Owner     string
	Token     int64
	ExpiresAt time.Time
}

// LockTry locks the coord_locks row of name for the rest of tx, creating
// it inside tx on first use — never through another connection, so it
// works with a pool of one. It returns an *Error matching ErrLocked at
// once when another transaction holds (or is creating) the lock, and tx
// stays usable after that.
func (d *Dialect) LockTry(ctx context.Context, tx Executor, name string) error {
	return d.ops.lockTry(ctx, tx, name)
}

// LockWait is LockTry that waits up to wait (ErrLockTimeout after it).
func (d *Dialect) LockWait(ctx context.Context, tx Executor, name string, wait time.Duration) error {
	return d.ops.lockWait(ctx, tx, name, wait)
}

// LockCleanup deletes the coord_locks rows of names created longer ago
// than age, at most batch, skipping rows being locked, in tx — a READ
// COMMITTED transaction (no gap locks on the MySQL family). A deleted
// name's next lock creates (MySQL family) or registers (PostgreSQL) it
// again.
func (d *Dialect) LockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error) {
	return d.ops.lockCleanup(ctx, tx, age, batch)
}

// SetIdleTimeout bounds how long the server lets tx's session sit idle in
// a transaction (milliseconds; see coord.Client.SetIdleTimeout).
func (d *Dialect) SetIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	return d.ops.setIdleTimeout(ctx, tx, ms)
}

// TxIdleTimeout is SetIdleTimeout where the setting ends with tx
// (PostgreSQL's SET LOCAL); where it would outlive tx on a pooled
// connection (MySQL/MariaDB: session variables) it sets nothing and
// reports false.
func (d *Dialect) TxIdleTimeout(ctx context.Context, tx Executor, ms int64) (bool, error) {
	return d.ops.txIdleTimeout(ctx, tx, ms)
}

// LeaseAcquire takes the lease when free, expired or already owner's, in
// autocommit statements that hold no row lock across round trips, and
// returns the row as it then is (Owner tells who won).
func (d *Dialect) LeaseAcquire(ctx context.Context, pool Executor, name, owner string, ttlMicros int64) (LeaseRow, error) {
	return d.ops.leaseAcquire(ctx, pool, name, owner, ttlMicros)
}

// LeaseRenew extends a live lease held by owner with token; false when it
// is not (expired, released, taken over).
func (d *Dialect) LeaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttlMicros int64) (time.Time, bool, error) {
	return d.ops.leaseRenew(ctx, pool, name, owner, token, ttlMicros)
}

// FenceAdvance raises the fence of resource to token inside tx unless a
// newer token has written; false when refused. The row stays locked until
// tx ends.
func (d *Dialect) FenceAdvance(ctx context.Context, tx Executor, resource string, token int64) (bool, error) {
	return d.ops.fenceAdvance(ctx, tx, resource, token)
}

// FencedUpdateRow runs the fenced update of a caller's table built from
// validated identifiers (see FencedUpdate) and reports whether the row
// accepted the token — true also when the update changed no value, on
// every driver setting (MySQL's clientFoundRows is not needed).
func (d *Dialect) FencedUpdateRow(ctx context.Context, tx Executor, table, keyCol, fenceCol string, setCols []string, token int64, key any, vals []any) (bool, error) {
	q, check, args, err := d.fencedStatements(table, keyCol, fenceCol, setCols, token, key, vals)
	if err != nil {
		return false, err
	}
	return d.ops.fencedUpdate(ctx, tx, fencedUpdate{q: q, args: args, check: check, key: key, token: token})
}

type fencedUpdate struct {
	q, check string
	args     []any
	key      any
	token    int64
}

// IdemInsert registers an idempotency key as pending in tx; false when it
// exists. With nowait it fails at once (ErrLockTimeout) when another
// transaction holds the key, leaving tx usable.
func (d *Dialect) IdemInsert(ctx context.Context, tx Executor, nowait bool, scope, key string, fp []byte, lockMicros int64) (bool, error) {
	return d.ops.idemInsert(ctx, tx, nowait, scope, key, fp, lockMicros)
}

// OutboxMark marks the published messages ids in tx in one statement
// (MySQL family: one per 1,000 ids) — or deletes them with deleteRows.
func (d *Dialect) OutboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
	if len(ids) == 0 {
		return nil
	}
	return d.ops.outboxMark(ctx, tx, ids, deleteRows)
}

// JobClaim inserts the run of a slot's shard in one autocommit statement
// and returns its attempt number (1, or on PostgreSQL the failover
// epoch's first attempt) — claimed false when the run already exists.
func (d *Dialect) JobClaim(ctx context.Context, pool Executor, job string, fire time.Time, shard, total int, status, owner string) (attempt int64, claimed bool, err error) {
	return d.ops.jobClaim(ctx, pool, job, fire, shard, total, status, owner)
}

// JobTakeover gives a stale or rerun-marked run to owner as a new attempt
// and returns its number (attempt+1, or on PostgreSQL at least the
// failover epoch's first attempt); ok false when someone else was first.
func (d *Dialect) JobTakeover(ctx context.Context, pool Executor, owner, job string, fire time.Time, shard int, attempt, graceMicros int64) (newAttempt int64, ok bool, err error) {
	return d.ops.jobTakeover(ctx, pool, owner, job, fire, shard, attempt, graceMicros)
}

// SegmentAdvance moves a tag's max_id forward by step in tx and returns
// the new max_id.
func (d *Dialect) SegmentAdvance(ctx context.Context, tx Executor, tag string, step int) (int64, error) {
	return d.ops.segmentAdvance(ctx, tx, tag, step)
}

// EndSession ends the server session named by SessionID's id and start;
// a session already gone is not an error.
func (d *Dialect) EndSession(ctx context.Context, pool Executor, id, start int64) error {
	return d.ops.endSession(ctx, pool, id, start)
}

// UUIDValue is a UUID as this dialect's uuid column takes it.
func (d *Dialect) UUIDValue(u [16]byte) any { return d.ops.uuidValue(u) }

// UUIDColumnType is the column type sqlcoord recommends for UUIDs.
func (d *Dialect) UUIDColumnType() string { return d.ops.uuidColumnType() }

// errLockHeld is ErrLocked when the lock statement skipped the lock (or
// a concurrent creator held it) rather than failing.
var errLockHeld = &Error{Kind: ErrLocked, Err: errors.New("held by another transaction")}
