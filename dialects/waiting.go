package dialects

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Waiting without holding anything open on the server (migration 25).
//
// A Client that waits registers one waiter row (coord_waiters) and renews
// it like a lease. Each wait is a committed ticket (coord_tickets) in its
// queue, numbered in arrival order (a ticket arrives when its insert
// commits; two taken at the same instant may commit in the other order of
// their numbers, and the later number heads the queue until the earlier
// commits); the head of a queue is its live ticket with the smallest
// number, and the statement that grants a lease refuses anyone but the
// head while the queue has one (LeaseSlot.Queue). A waiter is woken when it may have become the head of a free resource: on
// PostgreSQL by a NOTIFY on its own channel (WaiterChannel) sent by the
// statement that freed the resource; on the MySQL family by KILL QUERY of
// the lock wait its Client sleeps in on a connection of its own (Sleep),
// which the freeing client finds by the statement's text. Nothing here
// takes a snapshot, a read view or a transaction that outlives one
// statement.

// WaiterChannel is the PostgreSQL notification channel of waiter id.
func WaiterChannel(id int64) string { return "coord_w_" + strconv.FormatInt(id, 10) }

// QueueState is one queue as a waiting Client reads it: the resource
// waited for and the queue's live head.
type QueueState struct {
	Queue string
	Now   time.Time // the database's clock when read
	// A lease queue: the lease row (Holder "" when none); Version is the
	// time its current term was last written (elections), or zero.
	Holder    string
	Token     int64
	ExpiresAt time.Time
	Version   time.Time
	// A semaphore queue: the permit count (0: none recorded), the live
	// permits below it and the first of their expiries.
	Permits, Held int
	NextExpiry    time.Time
	// The live ticket with the smallest seq (HeadSeq 0: none) and when its
	// waiter's row expires unless renewed.
	HeadSeq     int64
	HeadOwner   string
	HeadWaiter  int64
	HeadExpires time.Time
}

// Live reports whether the lease of a lease queue is held now.
func (s QueueState) Live() bool { return s.Holder != "" && s.ExpiresAt.After(s.Now) }

// Free reports whether the resource can be granted now: a lease queue's
// lease is not held, a semaphore has a free permit.
func (s QueueState) Free(semaphore bool) bool {
	if semaphore {
		return s.Permits > 0 && s.Held < s.Permits
	}
	return !s.Live()
}

// Ticket is one wait in a queue, for operators.
type Ticket struct {
	Seq       int64
	Owner     string // the lease owner it waits to become
	Waiter    int64
	Label     string // the waiting Client: host:pid:…
	Since     time.Time
	Live      bool // its waiter renewed in time: it counts
	ExpiresAt time.Time
}

// waitSQL is a family's statements for waiting; built by pgWaitSQL and
// mysqlWaitSQL.
type waitSQL struct {
	register, renew, end, cleanup string
	take, drop                    string
	observe, unobserve            string
	ring, ringQueue               string
	tickets                       string
	leaseQueues, semQueues        func(n int) string
	reap                          string
	fenceLease                    string
	// MySQL family: the gate of FenceLease and the checks around it.
	gate, gateLease, fenceLeaseRead, fenceLeaseReturning string
	// MySQL family: coord_leases.attention (migration 27) — marked by a
	// ticket or a new gate, read by the release that ends a lease.
	markQueued, markGated, unmarkQueued, undoGate, leaseEnd, attention string
	// MySQL family: the waiter heading a queue (0: none).
	headWaiter string
	// MySQL family: LeaseAcquire (and its RETURNING form) for a lease
	// with its own queue (mysqlOwnQueue).
	acquireOwn, acquireOwnReturning string
}

// maxBatch bounds the queues read by one statement.
const maxBatch = 200

// WaiterRegister adds a waiter row live for ttl and returns its id.
func (d *Dialect) WaiterRegister(ctx context.Context, pool Executor, label string, ttl time.Duration) (int64, error) {
	if d.family == "postgres" {
		var id int64
		err := pool.QueryRow(ctx, d.w.register, label, ttl.Microseconds()).Scan(&id)
		return id, err
	}
	return execID(ctx, pool, d.w.register, label, ttl.Microseconds())
}

// WaiterRenew extends a live waiter row by ttl and records the id of the
// connection it sleeps on (MySQL family; 0 elsewhere). false: the row
// expired or is gone — its tickets no longer count.
func (d *Dialect) WaiterRenew(ctx context.Context, pool Executor, id, connID int64, ttl time.Duration) (bool, error) {
	n, err := pool.Exec(ctx, d.w.renew, ttl.Microseconds(), connID, id)
	return n > 0, err
}

// WaiterEnd deletes a waiter row with its tickets and observations.
func (d *Dialect) WaiterEnd(ctx context.Context, pool Executor, id int64) error {
	_, err := pool.Exec(ctx, d.w.end, id)
	return err
}

// WaiterCleanup deletes waiters expired longer ago than age, with their
// tickets and observations (at most batch waiters on PostgreSQL).
func (d *Dialect) WaiterCleanup(ctx context.Context, pool Executor, age time.Duration, batch int) (int64, error) {
	if d.family == "postgres" {
		var n int64
		err := pool.QueryRow(ctx, d.w.cleanup, age.Microseconds(), batch).Scan(&n)
		return n, err
	}
	return pool.Exec(ctx, d.w.cleanup, age.Microseconds())
}

// TicketTake queues owner in queue for waiter and returns the ticket's
// number (its place in arrival order).
func (d *Dialect) TicketTake(ctx context.Context, pool Executor, queue string, waiter int64, owner string) (int64, error) {
	if d.family == "postgres" {
		var seq int64
		err := pool.QueryRow(ctx, d.w.take, queue, waiter, owner).Scan(&seq)
		return seq, err
	}
	seq, err := execID(ctx, pool, d.w.take, queue, waiter, owner)
	if err != nil {
		return 0, err
	}
	// After the ticket is committed, so that a release clearing the mark
	// because it found no ticket either saw this one or is followed by
	// this mark (both update the lease's row).
	if _, err := pool.Exec(ctx, d.w.markQueued, queue); err != nil {
		pool.Exec(ctx, d.w.drop, seq)
		return 0, err
	}
	return seq, nil
}

// TicketDrop deletes ticket seq of queue; with wakeNext it wakes the
// queue's next live head (a semaphore with permits left, a waiter that
// gave up at the head).
func (d *Dialect) TicketDrop(ctx context.Context, pool Executor, queue string, seq int64, wakeNext bool) error {
	if d.family == "postgres" {
		rows, err := pool.Query(ctx, d.w.drop, seq, queue, wakeNext)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	}
	if _, err := pool.Exec(ctx, d.w.drop, seq); err != nil || !wakeNext {
		return err
	}
	return d.RingQueue(ctx, pool, queue, false)
}

// ObserverAdd records that waiter observes queue (an election's lease):
// a new term, a value or a resignation wakes it. ObserverRemove undoes it.
func (d *Dialect) ObserverAdd(ctx context.Context, pool Executor, queue string, waiter int64) error {
	_, err := pool.Exec(ctx, d.w.observe, queue, waiter)
	return err
}

// ObserverRemove: see ObserverAdd.
func (d *Dialect) ObserverRemove(ctx context.Context, pool Executor, queue string, waiter int64) error {
	_, err := pool.Exec(ctx, d.w.unobserve, queue, waiter)
	return err
}

// Ring wakes the waiters with these ids. On the MySQL family a waiter
// whose Client cannot be reached (it sleeps on another Galera node, under
// another user, or between two sleeps) is not woken: it finds out at its
// next read.
func (d *Dialect) Ring(ctx context.Context, pool Executor, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	if d.family == "postgres" {
		b, _ := json.Marshal(ids)
		rows, err := pool.Query(ctx, d.w.ring, string(b))
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	}
	return d.mysqlRing(ctx, pool, ids)
}

// RingQueue wakes queue's live head and, with observers, its observers.
func (d *Dialect) RingQueue(ctx context.Context, pool Executor, queue string, observers bool) error {
	args := []any{queue, observers}
	if d.family != "postgres" {
		args = append(args, queue)
	}
	rows, err := pool.Query(ctx, d.w.ringQueue, args...)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || d.family == "postgres" {
		return err // PostgreSQL notified in the statement
	}
	return d.mysqlRing(ctx, pool, ids)
}

// TermWritten wakes the observers of an election whose lease is queue
// after ElectionTerm wrote a term or a new value. PostgreSQL's statement
// notified them itself; on the MySQL family they (and the queue's head)
// are rung, as a release rings them.
func (d *Dialect) TermWritten(ctx context.Context, pool Executor, queue string) error {
	if d.family == "postgres" {
		return nil
	}
	return d.RingQueue(ctx, pool, queue, true)
}

// Tickets lists queue's tickets in arrival order (at most limit), live or
// not, for operators.
func (d *Dialect) Tickets(ctx context.Context, pool Executor, queue string, limit int) ([]Ticket, error) {
	rows, err := pool.Query(ctx, d.w.tickets, queue, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Ticket
	for rows.Next() {
		var t Ticket
		if err := rows.Scan(&t.Seq, &t.Owner, &t.Waiter, &t.Label, &t.Since, &t.ExpiresAt, &t.Live); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// LeaseQueues reads the lease queues names (lease names): each lease's
// row, its election term's last write, and the queue's live head.
func (d *Dialect) LeaseQueues(ctx context.Context, pool Executor, names []string) ([]QueueState, error) {
	return d.readQueues(ctx, pool, names, false)
}

// SemaphoreQueues reads semaphores' queues (semaphore names): the permit
// count, the live permits below it, and the queue ("semaphore:" + name)'s
// live head.
func (d *Dialect) SemaphoreQueues(ctx context.Context, pool Executor, names []string) ([]QueueState, error) {
	return d.readQueues(ctx, pool, names, true)
}

func (d *Dialect) readQueues(ctx context.Context, pool Executor, names []string, sem bool) ([]QueueState, error) {
	var out []QueueState
	for len(names) > 0 {
		n := min(len(names), maxBatch)
		batch := names[:n]
		names = names[n:]
		var (
			q    string
			args []any
		)
		if sem {
			q = d.w.semQueues(n)
		} else {
			q = d.w.leaseQueues(n)
		}
		if d.family == "postgres" {
			b, _ := json.Marshal(batch)
			args = []any{string(b)}
		} else {
			for _, s := range batch {
				args = append(args, s)
			}
		}
		rows, err := pool.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				s                          QueueState
				holder, headOwner          sql.NullString
				token, headSeq, headWaiter sql.NullInt64
				a, b, c                    sql.NullTime
				permits, held              sql.NullInt64
			)
			if sem {
				err = rows.Scan(&s.Queue, &s.Now, &permits, &held, &a, &headSeq, &headOwner, &headWaiter, &c)
				s.Permits, s.Held, s.NextExpiry = int(permits.Int64), int(held.Int64), a.Time
			} else {
				err = rows.Scan(&s.Queue, &s.Now, &holder, &token, &a, &b, &headSeq, &headOwner, &headWaiter, &c)
				s.Holder, s.Token, s.ExpiresAt, s.Version = holder.String, token.Int64, a.Time, b.Time
			}
			if err != nil {
				rows.Close()
				return nil, err
			}
			s.HeadSeq, s.HeadOwner, s.HeadWaiter, s.HeadExpires = headSeq.Int64, headOwner.String, headWaiter.Int64, c.Time
			out = append(out, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CanSleep reports whether waiters of this dialect are woken on
// connections of their own (Hold, Sleep, KILL QUERY): the MySQL family.
// PostgreSQL waiters listen (WaiterChannel) instead.
func (d *Dialect) CanSleep() bool { return d.family == "mysql" }

// wakeLock is waiter id's user-level lock, which its Client holds on one
// connection and waits for on another.
func wakeLock(id int64) string { return "sqlcoord:wake:" + strconv.FormatInt(id, 10) }

// wakeSleep is the statement a MySQL-family waiter sleeps in: a wait for
// its own lock, held by its other connection. Its text names the waiter,
// so that a releasing client finds the connection in the process list
// and interrupts it with KILL QUERY. It reads no table: no transaction,
// no read view. (A lock wait, not SELECT SLEEP: MariaDB wakes a killed
// SLEEP through one mutex that every sleeping session shares, and loses
// the wake-up now and then; a lock wait has a mutex of its own.)
func wakeSleep(id int64) string {
	return "SELECT GET_LOCK('" + wakeLock(id) + "', 30) /*sqlcoord:wake " + strconv.FormatInt(id, 10) + "*/"
}

// Hold takes waiter id's lock on conn (a connection of its own, idle from
// then on), so that Sleep on another connection waits.
func (d *Dialect) Hold(ctx context.Context, conn Executor, id int64) error {
	var got sql.NullInt64
	if err := conn.QueryRow(ctx, `SELECT GET_LOCK(?, 0)`, wakeLock(id)).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return errors.New("sqlcoord: the waiter's wake-up lock is held elsewhere")
	}
	return nil
}

// Sleep runs waiter id's wake-up statement on conn (a connection of its
// own): woken when another client interrupted it (Ring), false after
// 30 s; unheld when the lock was free (the holding connection is gone:
// it is released again here, and Hold must take it anew).
func (d *Dialect) Sleep(ctx context.Context, conn Executor, id int64) (woken, unheld bool, err error) {
	var r sql.NullInt64
	err = conn.QueryRow(ctx, wakeSleep(id)).Scan(&r)
	if err != nil {
		if errors.Is(d.Classify(err), ErrQueryCanceled) {
			return true, false, nil // KILL QUERY may surface as 1317
		}
		return false, false, err
	}
	if r.Valid && r.Int64 == 1 {
		_, err := conn.Exec(ctx, `DO RELEASE_LOCK(?)`, wakeLock(id))
		return false, true, err
	}
	return !r.Valid, false, nil // NULL: interrupted
}

// mysqlRing interrupts the wake-up sleeps of waiters ids: their
// connections are found by the sleep's text (so a connection id of a
// server that restarted is never taken for one of ours) and each gets
// KILL QUERY — allowed for a connection of the same user.
func (d *Dialect) mysqlRing(ctx context.Context, pool Executor, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[wakeSleep(id)] = true
	}
	rows, err := pool.Query(ctx, d.w.ring)
	if err != nil {
		return err
	}
	var conns []int64
	for rows.Next() {
		var (
			id   int64
			info sql.NullString
		)
		if err := rows.Scan(&id, &info); err != nil {
			rows.Close()
			return err
		}
		if want[info.String] {
			conns = append(conns, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var first error
	for _, c := range conns {
		if _, err := pool.Exec(ctx, "KILL QUERY "+strconv.FormatInt(c, 10)); err != nil && first == nil {
			if !errors.Is(d.Classify(err), ErrNoSuchSession) {
				first = err
			}
		}
	}
	return first
}

// execID runs a MySQL-family INSERT and returns its auto-increment id.
func execID(ctx context.Context, pool Executor, q string, args ...any) (int64, error) {
	if x, ok := pool.(IDExecutor); ok {
		_, id, err := x.ExecID(ctx, q, args...)
		return id, err
	}
	var id int64 // MariaDB: RETURNING
	err := pool.QueryRow(ctx, q+" RETURNING LAST_INSERT_ID()", args...).Scan(&id)
	return id, err
}

// Statement markers: a comment the statement starts with, by which Reap
// finds sessions waiting in one of them.
const (
	// MarkFence starts the fenced writes (Fence, FenceLease, FencedUpdate).
	MarkFence = "/*sqlcoord:fence*/"
	// MarkRevoke starts the statements that end a lease whose fenced
	// transactions must end first (release, revoke, depose).
	MarkRevoke = "/*sqlcoord:revoke*/"
)

// Reap ends the sessions that block a session waiting in a statement
// starting with marker and that have sat idle in their transaction for at
// least age — a holder frozen (SIGSTOP, a GC pause) or cut off inside its
// fenced transaction: on PostgreSQL pg_terminate_backend of the blockers
// pg_blocking_pids names, on the MySQL family KILL CONNECTION of the
// blocking transactions InnoDB reports (information_schema, which needs
// the PROCESS privilege). A blocker that is running a statement or waits
// for a lock itself is never ended, nor one of another database user
// (or of a role the caller is not a member of). Ending a session rolls
// its transaction back: nothing it wrote commits. It returns how many
// sessions it ended.
func (d *Dialect) Reap(ctx context.Context, pool Executor, marker string, age time.Duration) (int, error) {
	if d.family == "postgres" {
		var n int
		err := pool.QueryRow(ctx, d.w.reap, marker+"%", age.Microseconds()).Scan(&n)
		return n, err
	}
	rows, err := pool.Query(ctx, d.w.reap, marker+"%", age.Microseconds(), age.Milliseconds())
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if _, err := pool.Exec(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
			n++
		} else if !errors.Is(d.Classify(err), ErrNoSuchSession) {
			return n, err
		}
	}
	return n, nil
}

// LeaseFence is what FenceLease found: Admitted, or why not.
type LeaseFence struct {
	Admitted bool
	// NotHeld: the lease is no longer held with this token — released,
	// revoked, expired or taken over (checked in the same transaction).
	NotHeld bool
}

// FenceLease admits tx's writes to resource for a lease l still held by
// l.Owner with l.Token: the fence of resource rises to the token (as
// FenceAdvance) only while the lease is held, and a release or revocation
// of the lease waits until tx ends — so once it returns, no transaction
// fenced with the token commits. PostgreSQL: the lease's row is locked
// FOR KEY SHARE (renewals and acquisitions do not wait for it; a release
// takes it FOR UPDATE). MySQL family: a shared lock on the lease's row of
// coord_lease_gates, which only a release or revocation writes.
func (d *Dialect) FenceLease(ctx context.Context, tx Executor, resource string, l LeaseSlot) (LeaseFence, error) {
	if d.family == "postgres" {
		n, err := tx.Exec(ctx, d.w.fenceLease, resource, l.Token, l.HWM, l.Name, l.Owner)
		if err != nil || n > 0 {
			return LeaseFence{Admitted: n > 0}, err
		}
		var held bool
		err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM coord_leases WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp())`, l.Name, l.Owner, l.Token).Scan(&held)
		return LeaseFence{NotHeld: !held}, err
	}
	return d.mysqlFenceLease(ctx, tx, resource, l)
}

func (d *Dialect) mysqlFenceLease(ctx context.Context, tx Executor, resource string, l LeaseSlot) (LeaseFence, error) {
	// The gate's row: created (locked by us until tx ends) or, when it
	// exists, share-locked (INSERT IGNORE takes a shared lock on the
	// duplicate key), after any release in progress committed.
	created, err := tx.Exec(ctx, d.w.gate, l.Name)
	if err != nil {
		return LeaseFence{}, err
	}
	if created > 0 {
		// No release can have raised a gate that did not exist: mark the
		// lease's row gated if the lease is still held (a locking write:
		// after a release in progress, and a release waits for us), so
		// that every release from now on raises the gate. A gate exists
		// only with its mark: one whose lease is not held is deleted
		// again, whether the caller commits or not.
		marked, err := tx.Exec(ctx, d.w.markGated, l.Name, l.Owner, l.Token)
		if err != nil {
			return LeaseFence{}, err
		}
		if marked == 0 { // not held, or marked already (unchanged rows)
			var held bool
			if err := tx.QueryRow(ctx, d.w.gateLease, l.Name, l.Owner, l.Token).Scan(&held); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return LeaseFence{}, err
			}
			if !held {
				if _, err := tx.Exec(ctx, d.w.undoGate, l.Name); err != nil {
					return LeaseFence{}, err
				}
				return LeaseFence{NotHeld: true}, nil
			}
		}
	}
	for i := 0; ; i++ {
		var fence, gate sql.NullInt64
		args := []any{resource, l.Token, l.Name, l.Token, l.HWM, l.Token}
		if d.w.fenceLeaseReturning != "" { // MariaDB: one round trip when admitted
			err = tx.QueryRow(ctx, d.w.fenceLeaseReturning, args...).Scan(&fence)
			if err == nil && fence.Int64 == l.Token {
				return LeaseFence{Admitted: true}, nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return LeaseFence{}, err
			}
		} else if _, err := tx.Exec(ctx, d.w.fenceLease, args...); err != nil {
			return LeaseFence{}, err
		}
		fence = sql.NullInt64{}
		if err := tx.QueryRow(ctx, d.w.fenceLeaseRead, resource, l.Name).Scan(&fence, &gate); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return LeaseFence{}, err
		}
		if gate.Valid && gate.Int64 > l.Token {
			return LeaseFence{NotHeld: true}, nil
		}
		if fence.Valid && fence.Int64 == l.Token {
			return LeaseFence{Admitted: true}, nil
		}
		retry, eerr := d.ops.EpochCheck(ctx, tx, l.HWM)
		if eerr != nil || !retry || i > 0 {
			return LeaseFence{}, eerr
		}
	}
}

// pgHead is the live head of queue (an SQL expression), skipping the
// ticket numbered skip (a parameter or NULL).
func pgHead(queue, skip string) string {
	return `SELECT t.seq, t.owner, t.waiter, w.expires_at FROM coord_tickets t JOIN coord_waiters w ON w.id = t.waiter
  WHERE t.queue = ` + queue + ` AND t.seq IS DISTINCT FROM ` + skip + ` AND w.expires_at > clock_timestamp() ORDER BY t.seq LIMIT 1`
}

// pgHeadOwner is the owner of the live head of queue (NULL: none).
func pgHeadOwner(queue string) string {
	return `SELECT t.owner FROM coord_tickets t JOIN coord_waiters w ON w.id = t.waiter
  WHERE t.queue = ` + queue + ` AND w.expires_at > clock_timestamp() ORDER BY t.seq LIMIT 1`
}

// mysqlHead is pgHead for the MySQL family: column col (seq, owner or
// waiter) of the live head of queue.
func mysqlHead(col, queue string) string {
	return `SELECT t0.` + col + ` FROM coord_tickets t0 JOIN coord_waiters w0 ON w0.id = t0.waiter
  WHERE t0.queue = ` + queue + ` AND w0.expires_at > UTC_TIMESTAMP(6) ORDER BY t0.seq LIMIT 1`
}

func pgWaitSQL() *waitSQL {
	return &waitSQL{
		register: `INSERT INTO coord_waiters (label, conn_id, expires_at, created_at, renewed_at)
VALUES ($1, 0, clock_timestamp() + $2 * interval '1 microsecond', clock_timestamp(), clock_timestamp()) RETURNING id`,
		// A renewal lost in a crash only makes the waiter renew again or
		// queue anew: no flush wait.
		renew: `UPDATE coord_waiters SET expires_at = clock_timestamp() + $1 * interval '1 microsecond', renewed_at = clock_timestamp(), conn_id = $2
WHERE id = $3 AND expires_at > clock_timestamp() RETURNING ` + pgAsyncCommit,
		end: `WITH t AS (DELETE FROM coord_tickets WHERE waiter = $1), o AS (DELETE FROM coord_observers WHERE waiter = $1)
DELETE FROM coord_waiters WHERE id = $1`,
		cleanup: `WITH d AS (DELETE FROM coord_waiters WHERE id IN (SELECT id FROM coord_waiters
    WHERE expires_at < clock_timestamp() - $1 * interval '1 microsecond' ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id),
  t AS (DELETE FROM coord_tickets WHERE waiter IN (SELECT id FROM d)),
  o AS (DELETE FROM coord_observers WHERE waiter IN (SELECT id FROM d))
SELECT count(*) FROM d`,
		take: `INSERT INTO coord_tickets (queue, waiter, owner, created_at) VALUES ($1, $2, $3, clock_timestamp()) RETURNING seq`,
		// The next head is the live head but the dropped ticket (the
		// statement's snapshot still sees it).
		drop: `WITH d AS (DELETE FROM coord_tickets WHERE seq = $1)
SELECT pg_notify('coord_w_' || h.waiter, h.seq::text) FROM (` + pgHead("$2", "$1::bigint") + `) h WHERE $3`,
		observe:   `INSERT INTO coord_observers (queue, waiter, created_at) VALUES ($1, $2, clock_timestamp()) ON CONFLICT DO NOTHING`,
		unobserve: `DELETE FROM coord_observers WHERE queue = $1 AND waiter = $2`,
		ring:      `SELECT pg_notify('coord_w_' || x, '') FROM json_array_elements_text($1::json) AS x`,
		ringQueue: `SELECT w FROM (SELECT h.waiter AS w, h.seq::text AS p FROM (` + pgHead("$1", "NULL") + `) h
  UNION SELECT o.waiter, '' FROM coord_observers o JOIN coord_waiters x ON x.id = o.waiter WHERE $2 AND o.queue = $1 AND x.expires_at > clock_timestamp()) s
WHERE pg_notify('coord_w_' || w, p) IS NULL`,
		tickets: `SELECT t.seq, t.owner, t.waiter, COALESCE(w.label, ''), t.created_at, COALESCE(w.expires_at, t.created_at), COALESCE(w.expires_at > clock_timestamp(), false)
FROM coord_tickets t LEFT JOIN coord_waiters w ON w.id = t.waiter WHERE t.queue = $1 ORDER BY t.seq LIMIT $2`,
		leaseQueues: func(int) string {
			return `SELECT q.name, clock_timestamp(), l.owner, l.token, l.expires_at, e.updated_at, h.seq, h.owner, h.waiter, h.expires_at
FROM json_array_elements_text($1::json) AS q(name)
LEFT JOIN coord_leases l ON l.name = q.name
LEFT JOIN coord_election_terms e ON starts_with(q.name, 'election:') AND e.name = substr(q.name, 10) AND e.term = l.token
LEFT JOIN LATERAL (` + pgHead("q.name", "NULL") + `) h ON true`
		},
		semQueues: func(int) string {
			return `SELECT q.name, clock_timestamp(), s.permits, p.held, p.next, h.seq, h.owner, h.waiter, h.expires_at
FROM json_array_elements_text($1::json) AS q(name)
LEFT JOIN coord_semaphores s ON s.name = q.name
LEFT JOIN LATERAL (SELECT count(*) AS held, min(l.expires_at) AS next FROM coord_leases l
  WHERE l.name BETWEEN 'semaphore:' || q.name || '#0000' AND 'semaphore:' || q.name || '#' || lpad((COALESCE(s.permits, 0) - 1)::text, 4, '0')
    AND starts_with(l.name, 'semaphore:' || q.name || '#') AND length(l.name) = length(q.name) + 15 AND l.expires_at > clock_timestamp()) p ON true
LEFT JOIN LATERAL (` + pgHead("'semaphore:' || q.name", "NULL") + `) h ON true`
		},
		// Sessions waiting in a marked statement, their blockers in a
		// transaction begun at least $2 µs ago and idle in it for as long,
		// of a role the caller may end (a member of; a superuser's only by
		// a superuser).
		reap: `SELECT count(pg_terminate_backend(b.pid)) FROM pg_stat_activity w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS x(pid)
JOIN pg_stat_activity b ON b.pid = x.pid
WHERE w.datname = current_database() AND w.query LIKE $1 AND w.wait_event_type = 'Lock'
  AND b.pid <> pg_backend_pid() AND b.backend_type = 'client backend' AND b.usesysid IS NOT NULL
  AND pg_has_role(b.usesysid, 'MEMBER')
  AND (NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = b.usesysid) OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user))
  AND b.xact_start <= clock_timestamp() - $2 * interval '1 microsecond'
  AND b.state IN ('idle in transaction', 'idle in transaction (aborted)') AND b.state_change <= clock_timestamp() - $2 * interval '1 microsecond'`,
		// Args: resource, token, high-water mark, lease name, owner.
		fenceLease: MarkFence + ` WITH l AS (SELECT 1 FROM coord_leases WHERE name = $4 AND owner = $5 AND token = $2 AND expires_at > clock_timestamp() FOR KEY SHARE)
INSERT INTO coord_fences AS f (resource, fence, updated_at) SELECT $1, $2, clock_timestamp() FROM l WHERE ` + pgTokenCheck("$2", "$3") + `
ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at
WHERE f.fence <= EXCLUDED.fence`,
	}
}

// mysqlQueueList is a derived table q(name) of n placeholders.
func mysqlQueueList(n int) string {
	var b strings.Builder
	b.WriteString("(SELECT CAST(? AS CHAR(255) CHARACTER SET utf8mb4) COLLATE utf8mb4_bin AS name")
	for i := 1; i < n; i++ {
		b.WriteString(" UNION ALL SELECT ?")
	}
	b.WriteString(") q")
	return b.String()
}

func mysqlWaitSQL(epoch string) *waitSQL {
	now := "UTC_TIMESTAMP(6)"
	return &waitSQL{
		register: `INSERT INTO coord_waiters (label, conn_id, expires_at, created_at, renewed_at)
VALUES (?, 0, ` + now + ` + INTERVAL ? MICROSECOND, ` + now + `, ` + now + `)`,
		renew: `UPDATE coord_waiters SET expires_at = ` + now + ` + INTERVAL ? MICROSECOND, renewed_at = ` + now + `, conn_id = ?
WHERE id = ? AND expires_at > ` + now,
		end: `DELETE w, t, o FROM coord_waiters w LEFT JOIN coord_tickets t ON t.waiter = w.id LEFT JOIN coord_observers o ON o.waiter = w.id
WHERE w.id = ?`,
		cleanup: `DELETE w, t, o FROM coord_waiters w LEFT JOIN coord_tickets t ON t.waiter = w.id LEFT JOIN coord_observers o ON o.waiter = w.id
WHERE w.expires_at < ` + now + ` - INTERVAL ? MICROSECOND`,
		take:      `INSERT INTO coord_tickets (queue, waiter, owner, created_at) VALUES (?, ?, ?, ` + now + `)`,
		drop:      `DELETE FROM coord_tickets WHERE seq = ?`,
		observe:   `INSERT IGNORE INTO coord_observers (queue, waiter, created_at) VALUES (?, ?, ` + now + `)`,
		unobserve: `DELETE FROM coord_observers WHERE queue = ? AND waiter = ?`,
		// The wake-up waits of this user's connections (the process list
		// shows another user's only with PROCESS, and KILL needs it).
		ring: `SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET\\_LOCK(%) /*sqlcoord:wake %*/'`,
		ringQueue: `SELECT h.waiter FROM (` + mysqlHead("waiter", "?") + `) h
UNION SELECT o.waiter FROM coord_observers o JOIN coord_waiters x ON x.id = o.waiter WHERE ? AND o.queue = ? AND x.expires_at > ` + now,
		tickets: `SELECT t.seq, t.owner, t.waiter, COALESCE(w.label, ''), t.created_at, COALESCE(w.expires_at, t.created_at), COALESCE(w.expires_at > ` + now + `, FALSE)
FROM coord_tickets t LEFT JOIN coord_waiters w ON w.id = t.waiter WHERE t.queue = ? ORDER BY t.seq LIMIT ?`,
		leaseQueues: func(n int) string {
			return `SELECT q.name, ` + now + `, l.owner, l.token, l.expires_at, e.updated_at, t.seq, t.owner, t.waiter, w.expires_at
FROM ` + mysqlQueueList(n) + `
LEFT JOIN coord_leases l ON l.name = q.name
LEFT JOIN coord_election_terms e ON q.name LIKE 'election:%' AND e.name = CAST(SUBSTRING(q.name, 10) AS BINARY) AND e.term = l.token
LEFT JOIN coord_tickets t ON t.seq = (` + mysqlHead("seq", "q.name") + `)
LEFT JOIN coord_waiters w ON w.id = t.waiter`
		},
		semQueues: func(n int) string {
			prefix := `CONCAT('semaphore:', q.name, '#')`
			return `SELECT q.name, ` + now + `, s.permits,
  (SELECT COUNT(*) FROM coord_leases l WHERE l.name BETWEEN CONCAT(` + prefix + `, '0000') AND CONCAT(` + prefix + `, LPAD(COALESCE(s.permits, 0) - 1, 4, '0'))
    AND LENGTH(l.name) = LENGTH(q.name) + 15 AND l.expires_at > ` + now + `),
  (SELECT MIN(l.expires_at) FROM coord_leases l WHERE l.name BETWEEN CONCAT(` + prefix + `, '0000') AND CONCAT(` + prefix + `, LPAD(COALESCE(s.permits, 0) - 1, 4, '0'))
    AND LENGTH(l.name) = LENGTH(q.name) + 15 AND l.expires_at > ` + now + `),
  t.seq, t.owner, t.waiter, w.expires_at
FROM ` + mysqlQueueList(n) + `
LEFT JOIN coord_semaphores s ON s.name = CAST(q.name AS BINARY)
LEFT JOIN coord_tickets t ON t.seq = (` + mysqlHead("seq", "CONCAT('semaphore:', q.name)") + `)
LEFT JOIN coord_waiters w ON w.id = t.waiter`
		},
		// Blocking transactions of sessions waiting in a marked statement,
		// begun at least ? µs ago and idle (COMMAND Sleep, not waiting for
		// a lock) for as long (in ms). trx_started is the server's local
		// time.
		reap: `SELECT DISTINCT b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS lw
JOIN information_schema.INNODB_TRX r ON r.trx_id = lw.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = lw.blocking_trx_id
JOIN information_schema.PROCESSLIST p ON p.ID = b.trx_mysql_thread_id
WHERE r.trx_query LIKE ? AND b.trx_mysql_thread_id <> CONNECTION_ID() AND b.trx_started <= NOW(6) - INTERVAL ? MICROSECOND
  AND b.trx_state = 'RUNNING' AND p.COMMAND = 'Sleep' AND p.TIME_MS >= ?`,
		gate:      `INSERT IGNORE INTO coord_lease_gates (name, revoked_below, updated_at) VALUES (?, 0, ` + now + `)`,
		gateLease: `SELECT COUNT(*) > 0 FROM coord_leases WHERE name = ? AND owner = ? AND token = ? AND expires_at > ` + now + ` LOCK IN SHARE MODE`,
		undoGate:  `DELETE FROM coord_lease_gates WHERE name = ?`,
		// coord_leases.attention: bit 1 a waiter may be queued, bit 2
		// gated (see migration 27).
		markQueued: `UPDATE coord_leases SET attention = attention | 1 WHERE name = ? AND attention & 1 = 0`,
		markGated:  `UPDATE coord_leases SET attention = attention | 2 WHERE name = ? AND owner = ? AND token = ? AND expires_at > ` + now,
		// Cleared only when no live ticket remains: a ticket inserted
		// after this statement's read is marked after it (the mark waits
		// for this row lock).
		headWaiter:   `SELECT COALESCE((` + mysqlHead("waiter", "?") + `), 0)`,
		unmarkQueued: `UPDATE coord_leases SET attention = attention & 254 WHERE name = ? AND NOT EXISTS (` + mysqlHead("seq", "?") + `)`,
		// Ends the live lease l held by owner with token unless it is
		// gated (then only renewed_at changes, so that the row counts as
		// changed: the full release, Queries.LeaseRelease, ends it with
		// its gate), and reports attention as LAST_INSERT_ID. Args: name,
		// owner, token.
		leaseEnd: MarkRevoke + ` UPDATE coord_leases SET expires_at = IF(attention & 2, expires_at, ` + now + `) + INTERVAL 0 * LAST_INSERT_ID(attention) MICROSECOND,
  renewed_at = IF(attention & 2, ` + now + `, renewed_at)
WHERE name = ? AND owner = ? AND token = ? AND expires_at > ` + now,
		attention: `SELECT attention FROM coord_leases WHERE name = ?`,
		// The fence rises only when the gate admits the token (the gate's
		// row is share-locked by the caller: its value cannot change
		// before the caller's transaction ends). Args: resource, token,
		// lease, token, high-water mark, token.
		fenceLease: MarkFence + ` INSERT INTO coord_fences (resource, fence, updated_at) SELECT ?, ?, ` + now + `
FROM coord_lease_gates g JOIN (SELECT ` + epoch + ` AS b) e WHERE g.name = ? AND g.revoked_below <= ? AND e.b >= ? AND e.b < ?
ON DUPLICATE KEY UPDATE
  updated_at = IF(coord_fences.fence <= VALUES(fence), VALUES(updated_at), coord_fences.updated_at),
  fence      = IF(coord_fences.fence <= VALUES(fence), VALUES(fence), coord_fences.fence)`,
		// The fence (our own write, or a newer one) and the gate, both
		// as last committed or written by the caller. Args: resource, lease.
		fenceLeaseRead: `SELECT f.fence, g.revoked_below FROM coord_lease_gates g LEFT JOIN coord_fences f ON f.resource = ? WHERE g.name = ? LOCK IN SHARE MODE`,
	}
}
