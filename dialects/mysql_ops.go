package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// mysqlOps: MySQL/MariaDB have no RETURNING on UPDATE or upsert, so a
// statement is followed by a read; a failed statement rolls back only
// itself, so no savepoints. MariaDB and MySQL 8 differ only in statement
// text (wait bounds, idle timeout), kept in their Queries.
type mysqlOps struct {
	q *Queries
	d *Dialect // for the wake-ups of a release (Ring)
}

func secs(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

// lockRow locks name's row in tx with q, the one locking statement that
// creates the row or waits for its lock (see Queries.LockNowait): no
// statement before it, so nothing fixes the transaction's read view before
// the lock is granted, whatever the isolation level.
func (o mysqlOps) lockRow(ctx context.Context, tx Executor, q, name string) error {
	_, err := tx.Exec(ctx, q, name)
	return classifyMySQL(err)
}

func (o mysqlOps) LockTry(ctx context.Context, tx Executor, name string, _ *LockNames) error {
	err := o.lockRow(ctx, tx, o.q.LockNowait, name)
	if errors.Is(err, ErrLockTimeout) { // MariaDB reports NOWAIT as 1205, MySQL 8 waited its 1 s
		var e *Error
		errors.As(err, &e)
		return &Error{Kind: ErrLocked, Code: e.Code, Err: e.Err}
	}
	return err
}

func (o mysqlOps) LockWait(ctx context.Context, tx Executor, name string, wait time.Duration, _ *LockNames) error {
	return o.lockRow(ctx, tx, fmt.Sprintf(o.q.LockWait, secs(wait)), name)
}

func (o mysqlOps) LockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error) {
	names, err := pick[string](ctx, tx, o.q.LockCleanup, age.Microseconds(), batch)
	if err != nil || len(names) == 0 {
		return 0, err
	}
	return tx.Exec(ctx, "DELETE FROM coord_locks WHERE name IN ("+marks(len(names))+")", names...)
}

// outboxCleanup picks the batch with a non-locking read through the
// (state, id, …) index, then deletes those rows by primary key, checking
// they are still published. One DELETE … ORDER BY … LIMIT could not be
// told which index to walk (MariaDB takes no index hint on a one-table
// DELETE); when it walked the primary key under REPEATABLE READ it locked
// every row it passed — pending ones too — and the gap at the table's end
// where producers insert, for as long as it ran.
func (o mysqlOps) OutboxCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	ids, err := pick[int64](ctx, x, o.q.OutboxCleanup, age.Microseconds(), batch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return x.Exec(ctx, "DELETE FROM coord_outbox WHERE id IN ("+marks(len(ids))+") AND state = 'published'", ids...)
}

// pick reads the one-column keys q returns, as arguments for a DELETE.
func pick[T any](ctx context.Context, x Executor, q string, args ...any) ([]any, error) {
	rows, err := x.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var keys []any
	for rows.Next() {
		var k T
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Close()
}

// marks is n placeholders, comma-separated.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func (o mysqlOps) TxIdleTimeout(context.Context, Executor, int64) (bool, error) { return false, nil }

func (o mysqlOps) SetIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	_, err := tx.Exec(ctx, o.q.IdleTxTimeoutSet, ms)
	return err
}

// Two autocommit statements, never one transaction around both: a holder
// frozen between them must not keep the row locked. Between them only an
// expiry can change the owner, and then the lease is reported held, which
// is what it is by then. The read also tells the epoch: NULL — the upsert
// issued nothing because this server's history is not recorded as the
// newest (a promoted replica) — records a new epoch and runs it again.
func (o mysqlOps) LeaseAcquire(ctx context.Context, pool Executor, l LeaseSlot) (LeaseRow, error) {
	name, owner, ttl, hwm := l.Name, l.Owner, l.TTLMicros, l.HWM
	stmtReturning, stmt := o.q.LeaseAcquireReturning, o.q.LeaseAcquire
	own := l.Queue == l.Name
	if own {
		stmtReturning, stmt = o.d.w.acquireOwnReturning, o.d.w.acquireOwn
	}
	for i := 0; ; i++ {
		var r LeaseRow
		var e sql.NullInt64
		// Ours only when the row says so and is live: an expired row of
		// ours that the queue kept from us is someone else's turn.
		mine := func() bool { return r.Owner == owner && !r.Queued }
		if stmtReturning != "" { // MariaDB: one round trip
			err := pool.QueryRow(ctx, stmtReturning, name, owner, ttl, hwm, l.Queue, l.Queue).Scan(&r.Owner, &r.Token, &r.ExpiresAt, &e, &r.Queued)
			if err == nil && r.Queued && own {
				// free, but a waiter may be queued: ask the queue
				own, stmtReturning, stmt = false, o.q.LeaseAcquireReturning, o.q.LeaseAcquire
				i--
				continue
			}
			if err == nil && e.Valid && e.Int64 >= hwm && (!mine() || r.Token > e.Int64) {
				r.Epoch = e.Int64
				if r.Owner == owner && r.Queued {
					r.Owner = ""
				}
				return r, nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return r, err
			}
		} else if _, err := pool.Exec(ctx, stmt, name, owner, ttl, hwm, l.Queue, l.Queue); err != nil {
			return r, err
		}
		err := pool.QueryRow(ctx, o.q.LeaseRead, name).Scan(&r.Owner, &r.Token, &r.ExpiresAt, &e, &r.Queued)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return r, err
		}
		if err == nil && r.Queued && own {
			own, stmtReturning, stmt = false, o.q.LeaseAcquireReturning, o.q.LeaseAcquire
			i--
			continue
		}
		if err == nil && e.Valid && e.Int64 >= hwm && (!mine() || r.Token > e.Int64) {
			r.Epoch = e.Int64
			if r.Owner == owner && r.Queued {
				r.Owner = ""
			}
			return r, nil
		}
		// nothing issued: no epoch yet, a stale server, or (granted in an
		// older epoch) an epoch started between the two statements
		epoch, _, eerr := o.epochNow(ctx, pool, hwm)
		if eerr != nil {
			return r, eerr
		}
		if i == 2 {
			return r, fmt.Errorf("sqlcoord: lease %q: the failover epoch kept changing (now %d); retry", name, epoch)
		}
	}
}

func (o mysqlOps) LeaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttl, hwm int64) (Renewal, error) {
	for i := 0; ; i++ {
		var r Renewal
		// renewed_at changes on every renewal, so the count is the same
		// with or without clientFoundRows
		n, err := pool.Exec(ctx, o.q.LeaseRenew, ttl, name, owner, token, hwm)
		if err != nil {
			return r, err
		}
		if n == 0 {
			_, retry, err := o.epochNow(ctx, pool, hwm)
			if err == nil && retry && i == 0 {
				continue
			}
			return r, err
		}
		err = pool.QueryRow(ctx, o.q.LeaseExpiry, name, owner, token).Scan(&r.ExpiresAt, &r.Epoch)
		if errors.Is(err, sql.ErrNoRows) {
			return r, nil
		}
		r.OK = err == nil
		return r, err
	}
}

func (o mysqlOps) LeaseReleaseWaking(ctx context.Context, pool Executor, l LeaseSlot, _ string) (bool, error) {
	return o.releaseRinging(ctx, pool, l)
}

// releaseRinging ends the lease with the full statement (raising its
// gate) and wakes its queue's head, and with l.Observed its observers.
func (o mysqlOps) releaseRinging(ctx context.Context, pool Executor, l LeaseSlot) (bool, error) {
	released, head, err := o.release(ctx, pool, l)
	if err != nil || !released {
		return released, err
	}
	if l.Observed {
		return true, o.d.RingQueue(ctx, pool, l.Queue, true)
	}
	return true, o.d.Ring(ctx, pool, head...)
}

// leaseRelease ends a lease in one single-table UPDATE unless its row's
// attention (migration 27) says more is needed: a gated lease is ended by
// the full statement, which raises its gate; a lease whose queue may
// hold a waiter has the queue's head woken (and the mark cleared when
// the queue is empty).
func (o mysqlOps) LeaseRelease(ctx context.Context, pool Executor, l LeaseSlot) (bool, error) {
	l.Observed = false // LeaseRelease wakes no observer
	if l.Queue != l.Name {
		return o.releaseRinging(ctx, pool, l)
	}
	var n, attention int64
	var err error
	if x, ok := pool.(IDExecutor); ok {
		n, attention, err = x.ExecID(ctx, o.d.w.leaseEnd, l.Name, l.Owner, l.Token)
	} else if n, err = pool.Exec(ctx, o.d.w.leaseEnd, l.Name, l.Owner, l.Token); err == nil && n > 0 {
		err = pool.QueryRow(ctx, o.d.w.attention, l.Name).Scan(&attention)
	}
	if err != nil || n == 0 {
		return false, err
	}
	if attention&2 != 0 {
		return o.releaseRinging(ctx, pool, l)
	}
	if attention&1 == 0 {
		return true, nil
	}
	var head int64
	if err := pool.QueryRow(ctx, o.d.w.headWaiter, l.Queue).Scan(&head); err != nil {
		return true, err
	}
	if head == 0 {
		_, err := pool.Exec(ctx, o.d.w.unmarkQueued, l.Name, l.Queue)
		return true, err
	}
	return true, o.d.Ring(ctx, pool, head)
}

// release ends the lease and returns the waiter heading its queue (none,
// or one id) to wake: LAST_INSERT_ID of the statement where the executor
// reports it, else read after it.
func (o mysqlOps) release(ctx context.Context, pool Executor, l LeaseSlot) (bool, []int64, error) {
	var (
		n, head int64
		err     error
	)
	if x, ok := pool.(IDExecutor); ok {
		n, head, err = x.ExecID(ctx, o.q.LeaseRelease, l.Queue, l.Name, l.Owner, l.Token)
	} else if n, err = pool.Exec(ctx, o.q.LeaseRelease, l.Queue, l.Name, l.Owner, l.Token); err == nil && n > 0 {
		err = pool.QueryRow(ctx, `SELECT COALESCE((`+mysqlHead("waiter", "?")+`), 0)`, l.Queue).Scan(&head)
	}
	if err != nil || n == 0 {
		return false, nil, err
	}
	if head > 0 {
		return true, []int64{head}, nil
	}
	return true, nil, nil
}

// fenceAdvance: when the fence did not move to token — a newer fence, a
// token from before the epoch's base, a stale server, or no epoch yet for
// this run — the epoch is checked (and recorded for a new run, then the
// statement runs once more).
func (o mysqlOps) FenceAdvance(ctx context.Context, tx Executor, resource string, token, hwm int64) (bool, error) {
	for i := 0; ; i++ {
		var fence int64
		var err error
		if o.q.FenceAdvanceReturning != "" { // MariaDB: one round trip
			err = tx.QueryRow(ctx, o.q.FenceAdvanceReturning, resource, token, hwm, token).Scan(&fence)
		} else if _, err = tx.Exec(ctx, o.q.FenceAdvanceChecked, resource, token, hwm, token); err == nil {
			err = tx.QueryRow(ctx, o.q.FenceRead, resource).Scan(&fence)
		}
		if err == nil && fence == token {
			return true, nil
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
		retry, eerr := o.EpochCheck(ctx, tx, hwm)
		if eerr != nil || !retry || i > 0 {
			return false, eerr
		}
	}
}

// fencedUpdate does not rely on clientFoundRows: an update that changed
// no value reports 0 rows, so 0 is checked with a locking read of the row's
// fence (the update's lock is already held).
func (o mysqlOps) FencedUpdate(ctx context.Context, tx Executor, u FencedWrite) (bool, error) {
	n, err := tx.Exec(ctx, u.Query, u.Args...)
	if err != nil || n > 0 {
		return n > 0, err
	}
	// refused as a stale primary, or no epoch yet for this run?
	if retry, err := o.EpochCheck(ctx, tx, u.HWM); err != nil || retry {
		if err != nil {
			return false, err
		}
		if n, err = tx.Exec(ctx, u.Query, u.Args...); err != nil || n > 0 {
			return n > 0, err
		}
	}
	var fence int64
	err = tx.QueryRow(ctx, u.Check, u.Key).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && fence == u.Token, err
}

func (o mysqlOps) IdemInsert(ctx context.Context, tx Executor, k IdemKey) (IdemResult, error) {
	q, plain := o.q.IdemInsert, o.q.IdemInsertPlain
	if k.NoWait {
		q = o.q.IdemInsertNowait
		plain = o.q.IdemInsertPlainNowait
	}
	return o.idemClaim(ctx, tx, k.Table, plain, q, k.Scope, k.Key, k.Fingerprint, k.LockMicros)
}

func (o mysqlOps) IdemRecord(ctx context.Context, tx Executor, k IdemKey, response []byte) (IdemResult, error) {
	return o.idemClaim(ctx, tx, k.Table, o.q.IdemInsertDonePlain, o.q.IdemInsertDone, k.Scope, k.Key, k.Fingerprint, response)
}

// idemClaim runs a key's claim: Inserted when every row the key should
// have went in (MySQL 8: the one row; MariaDB: a plain table's one row,
// or, when that inserted nothing or the caller expects a table
// partitioned by period (table), see mariaDBIdemClaim). When a later
// period's row meets another claim, the first row is deleted again and
// the key reported as existing.
func (o mysqlOps) idemClaim(ctx context.Context, tx Executor, table KeyTable, plain, q string, args ...any) (IdemResult, error) {
	if o.q.IdemInsertRest == "" {
		n, err := tx.Exec(ctx, q, args...)
		return IdemResult{Inserted: n == 1, Table: KeyTablePlain}, err
	}
	if table != KeyTablePartitioned {
		// a plain table's one row; a duplicate, or a table partitioned by
		// period (no default for period), fails the statement alone
		n, err := tx.Exec(ctx, plain, args...)
		switch {
		case err == nil:
			return IdemResult{Inserted: n == 1, Table: KeyTablePlain}, nil
		case isNoDefault(err):
			table = KeyTablePartitioned
		case !errors.Is(o.d.Classify(err), ErrDuplicate):
			return IdemResult{}, err
		}
	}
	var first int64
	var legacyUntil, cur sql.NullInt64
	err := tx.QueryRow(ctx, q, args...).Scan(&first, &legacyUntil, &cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return IdemResult{Table: table}, nil // the key exists: nothing written
	case err != nil:
		return IdemResult{}, err
	case !legacyUntil.Valid || !cur.Valid:
		return IdemResult{Inserted: true, Table: KeyTablePlain}, nil // not partitioned: one row
	}
	// the claim's periods are cur and cur+1 (and 0, the first, while
	// cur <= legacy_until)
	from := cur.Int64
	if first == cur.Int64 {
		from++
	}
	r := IdemResult{Table: KeyTablePartitioned}
	_, err = tx.Exec(ctx, o.q.IdemInsertRest, from, cur.Int64+1, args[0], args[1], first)
	if err == nil {
		r.Inserted = true
		return r, nil
	}
	if !errors.Is(o.d.Classify(err), ErrDuplicate) {
		return IdemResult{}, err
	}
	_, err = tx.Exec(ctx, o.q.IdemUndo, args[0], args[1], strconv.FormatInt(first, 10))
	return r, err
}

func (o mysqlOps) JobClaim(ctx context.Context, pool Executor, j JobSlot, hwm int64) (Issued, bool, error) {
	for i := 0; ; i++ {
		var r Issued
		if o.q.JobClaimReturning != "" { // MariaDB: one round trip
			err := pool.QueryRow(ctx, o.q.JobClaimReturning, j.Job, j.Fire, j.Shard, j.Total, j.Status, j.Owner, j.Reason, hwm).Scan(&r.Value)
			if err == nil {
				r.Epoch = max(r.Value-1, 0)
				return r, true, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return r, false, err
			}
		} else {
			n, err := pool.Exec(ctx, o.q.JobClaim, j.Job, j.Fire, j.Shard, j.Total, j.Status, j.Owner, j.Reason, hwm)
			if err != nil {
				return r, false, err
			}
			if n == 1 {
				err := pool.QueryRow(ctx, o.q.JobAttempt, j.Job, j.Fire, j.Shard).Scan(&r.Value, &r.Epoch)
				return r, err == nil, err
			}
		}
		// not inserted: claimed already, or no epoch issued it
		_, retry, err := o.epochNow(ctx, pool, hwm)
		if err != nil || !retry || i > 0 {
			return r, false, err
		}
	}
}

func (o mysqlOps) JobTakeover(ctx context.Context, pool Executor, j JobSlot, attempt, grace, hwm int64) (Issued, bool, error) {
	for i := 0; ; i++ {
		var r Issued
		n, err := pool.Exec(ctx, o.q.JobTakeover, hwm, j.Owner, j.Job, j.Fire, j.Shard, attempt, grace)
		if err != nil {
			return r, false, err
		}
		if n != 1 {
			_, retry, err := o.epochNow(ctx, pool, hwm)
			if err == nil && retry && i == 0 {
				continue
			}
			return r, false, err
		}
		err = pool.QueryRow(ctx, o.q.JobAttempt, j.Job, j.Fire, j.Shard).Scan(&r.Value, &r.Epoch)
		return r, err == nil, err
	}
}

func (o mysqlOps) EpochAdvance(ctx context.Context, x Executor) (int64, error) {
	if o.q.EpochAdvance == "" {
		return 0, errors.New("sqlcoord: no failover epoch on this dialect")
	}
	if _, err := x.Exec(ctx, o.q.EpochRun); err != nil {
		return 0, err
	}
	if _, err := x.Exec(ctx, o.q.EpochAdvance, "advance"); err != nil {
		return 0, err
	}
	if _, err := x.Exec(ctx, o.q.EpochLog); err != nil {
		return 0, err
	}
	var b int64
	err := x.QueryRow(ctx, o.q.EpochRead).Scan(&b)
	return b, err
}

func (o mysqlOps) EpochCheck(ctx context.Context, x Executor, hwm int64) (bool, error) {
	if o.q.EpochEnsure == "" {
		return false, nil
	}
	_, retry, err := o.epochNow(ctx, x, hwm)
	return retry, err
}

func (o mysqlOps) WorkerEpochReady(ctx context.Context, pool Executor, wait, hwm int64) (EpochGrace, error) {
	for i := 0; ; i++ {
		var g EpochGrace
		var e sql.NullInt64
		var left int64
		if err := pool.QueryRow(ctx, o.q.WorkerEpochReady, wait, wait, wait).Scan(&g.Ready, &e, &left); err != nil {
			return g, err
		}
		if e.Valid && e.Int64 >= hwm {
			g.Epoch, g.Left = e.Int64, time.Duration(left)*time.Microsecond
			return g, nil
		}
		if _, _, err := o.epochNow(ctx, pool, hwm); err != nil || i > 0 {
			return g, err
		}
	}
}

func (o mysqlOps) OutboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
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

func (o mysqlOps) SegmentAdvance(ctx context.Context, tx Executor, tag string, step int, hwm int64) (Issued, error) {
	for i := 0; ; i++ {
		var r Issued
		n, err := tx.Exec(ctx, o.q.SegmentAdvance, hwm, step, step, tag)
		if err != nil {
			return r, err
		}
		if n == 0 { // no such tag, or no epoch issued it
			_, retry, err := o.epochNow(ctx, tx, hwm)
			if err == nil && retry && i == 0 {
				continue
			}
			if err == nil {
				err = fmt.Errorf("segment %q: %w", tag, sql.ErrNoRows)
			}
			return r, err
		}
		err = tx.QueryRow(ctx, o.q.SegmentRead, tag).Scan(&r.Value, &r.Epoch) // our own update is visible
		return r, err
	}
}

// KILL is not a preparable statement: the id, an integer read from the
// server, is formatted into the text.
func (o mysqlOps) EndSession(ctx context.Context, pool Executor, id, _ int64) error {
	_, err := pool.Exec(ctx, fmt.Sprintf(o.q.SessionEnd, id))
	if errors.Is(classifyMySQL(err), ErrNoSuchSession) {
		return nil
	}
	return err
}

// BINARY(16), bytes in order: byte order equals time order for UUIDv7.
func (o mysqlOps) UuidValue(u [16]byte) any {
	b := make([]byte, 16)
	copy(b, u[:])
	return b
}
func (o mysqlOps) UuidColumnType() string { return "BINARY(16)" }

func (o mysqlOps) JobFail(ctx context.Context, pool Executor, f JobFailure) (int64, error) {
	return pool.Exec(ctx, o.q.JobFail, f.Error, f.Permanent, f.MaxAttempts, f.BackoffMicros, f.Permanent, f.MaxAttempts,
		f.Slot.Job, f.Slot.Fire, f.Slot.Shard, f.Attempt)
}

func (o mysqlOps) SagaRecord(ctx context.Context, x Executor, r SagaRecord) (bool, error) {
	n, err := x.Exec(ctx, o.q.Saga.Record, r.Idx, r.Status, r.Step, r.Tries, r.Reason, r.Err, r.Stuck, r.DueMicros, r.Keep,
		r.BranchStatus, r.BranchTries, r.BranchErr, r.GID, r.Claim)
	return n >= 1, err
}

func (o mysqlOps) SagaClaim(ctx context.Context, x Executor, c SagaClaim) ([]SagaClaimed, error) {
	q := o.q.Saga
	if c.GID != "" {
		n, err := x.Exec(ctx, q.ClaimSetGID, c.Token, c.Owner, c.LeaseMicros, c.GID)
		if err != nil || n == 0 {
			return nil, err
		}
		return scanSagaClaims(x.Query(ctx, fmt.Sprintf(q.ClaimRead, marks(1)), c.GID))
	}
	gids, err := pick[string](ctx, x, q.ClaimPick, c.Max)
	if err != nil || len(gids) == 0 {
		return nil, err
	}
	if _, err := x.Exec(ctx, fmt.Sprintf(q.ClaimSet, marks(len(gids))), append([]any{c.Token, c.Owner, c.LeaseMicros}, gids...)...); err != nil {
		return nil, err
	}
	return scanSagaClaims(x.Query(ctx, fmt.Sprintf(q.ClaimRead, marks(len(gids))), gids...))
}

// sagaCleanup picks the batch, then deletes its branches and the
// transactions themselves (a table copied with CREATE TABLE … LIKE has no
// foreign key to cascade).
func (o mysqlOps) SagaCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	gids, err := pick[string](ctx, x, o.q.Saga.CleanupPick, age.Microseconds(), batch)
	if err != nil || len(gids) == 0 {
		return 0, err
	}
	if _, err := x.Exec(ctx, fmt.Sprintf(o.q.Saga.CleanupBranches, marks(len(gids))), gids...); err != nil {
		return 0, err
	}
	return x.Exec(ctx, fmt.Sprintf(o.q.Saga.CleanupGtx, marks(len(gids))), gids...)
}

// isNoDefault: MySQL error 1364, a strict insert that omits a column with
// no default (period, on a table partitioned by period).
func isNoDefault(err error) bool {
	n, _, ok := mysqlNumber(err)
	return ok && n == 1364
}
