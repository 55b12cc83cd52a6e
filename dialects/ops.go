package dialects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Operations are the statements whose shape differs between databases:
// what PostgreSQL does in one statement MySQL needs two for, what one
// server lets a transaction survive the other aborts it for. Each dialect
// implements them in its own file (postgres_ops.go, mysql_ops.go; MariaDB
// embeds MySQL and overrides what differs), so callers in coord, ids,
// jobs, txn and outbox never branch on the database.
//
// Operations is the contract a dialect implements. Each method is
// documented on the Dialect method of the same name, which checks its
// arguments, calls it and classifies its errors. A dialect written outside
// this package starts from a built-in one's (Dialect.Operations), changes
// what its database does differently, and is made with Derive and
// installed with Register; it must pass the conformance suite
// (package sqlcoordtest) like the built-in ones.
type Operations interface {
	LockTry(ctx context.Context, tx Executor, name string, names *LockNames) error
	LockWait(ctx context.Context, tx Executor, name string, wait time.Duration, names *LockNames) error
	LockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error)
	OutboxCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error)
	SetIdleTimeout(ctx context.Context, tx Executor, ms int64) error
	TxIdleTimeout(ctx context.Context, tx Executor, ms int64) (bool, error)
	LeaseAcquire(ctx context.Context, pool Executor, l LeaseSlot) (LeaseRow, error)
	LeaseRenew(ctx context.Context, pool Executor, name, owner string, token, ttlMicros, hwm int64) (Renewal, error)
	LeaseRelease(ctx context.Context, pool Executor, l LeaseSlot) (bool, error)
	LeaseReleaseWaking(ctx context.Context, pool Executor, l LeaseSlot, channel string) (bool, error)
	FenceAdvance(ctx context.Context, tx Executor, resource string, token, hwm int64) (bool, error)
	FencedUpdate(ctx context.Context, tx Executor, u FencedWrite) (bool, error)
	IdemInsert(ctx context.Context, tx Executor, k IdemKey) (IdemResult, error)
	IdemRecord(ctx context.Context, tx Executor, k IdemKey, response []byte) (IdemResult, error)
	SegmentAdvance(ctx context.Context, tx Executor, tag string, step int, hwm int64) (Issued, error)
	JobClaim(ctx context.Context, pool Executor, j JobSlot, hwm int64) (Issued, bool, error)
	JobTakeover(ctx context.Context, pool Executor, j JobSlot, attempt, graceMicros, hwm int64) (Issued, bool, error)
	JobFail(ctx context.Context, pool Executor, f JobFailure) (int64, error)
	WorkerEpochReady(ctx context.Context, pool Executor, waitMicros, hwm int64) (EpochGrace, error)
	OutboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error
	EndSession(ctx context.Context, pool Executor, id, start int64) error
	EpochCheck(ctx context.Context, x Executor, hwm int64) (bool, error)
	EpochAdvance(ctx context.Context, x Executor) (int64, error)
	SagaRecord(ctx context.Context, x Executor, r SagaRecord) (bool, error)
	SagaClaim(ctx context.Context, x Executor, c SagaClaim) ([]SagaClaimed, error)
	SagaCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error)
	UuidValue(u [16]byte) any
	UuidColumnType() string
}

// LeaseRow is a coord_leases row as an acquire left it, and the failover
// epoch the acquire ran in (0 when it granted nothing, or the dialect has
// no epoch).
type LeaseRow struct {
	Owner     string
	Token     int64
	ExpiresAt time.Time
	Epoch     int64
	// Queued: the lease was free, but a waiter that queued before the
	// caller heads its queue (Owner is the lease's last holder).
	Queued bool
	// TicketDropped: the grant also deleted LeaseSlot.Ticket (PostgreSQL).
	TicketDropped bool
}

// Renewal is what a lease renewal did: OK false when the lease is no longer
// the caller's (expired, released, taken over, or granted in an earlier
// failover epoch).
type Renewal struct {
	ExpiresAt time.Time
	OK        bool
	Epoch     int64
}

// Issued is a counter value a statement issued (a segment's max_id, a job
// attempt) and the failover epoch it was issued in.
type Issued struct {
	Value int64
	Epoch int64
}

// JobSlot names one shard of one slot of a job, and what a claim records.
type JobSlot struct {
	Job    string
	Fire   time.Time
	Shard  int
	Total  int    // shards in the slot (claim)
	Status string // status a claim records ("running", "skipped" or "queued")
	Owner  string
	Reason string // why a claim records a slot skipped or queued ("": none)
}

// LockTry locks the coord_locks row of name for the rest of tx, creating
// it inside tx on first use — never through another connection, so it
// works with a pool of one. It returns an *Error matching ErrLocked at
// once when another transaction holds (or is creating) the lock, and tx
// stays usable after that. names (may be nil) remembers which names are
// registered for the console, so that PostgreSQL's lock statement need not
// look (see LockNames).
func (d *Dialect) LockTry(ctx context.Context, tx Executor, name string, names *LockNames) error {
	return d.ops.LockTry(ctx, tx, name, names)
}

// LockWait is LockTry that waits up to wait (ErrLockTimeout after it).
func (d *Dialect) LockWait(ctx context.Context, tx Executor, name string, wait time.Duration, names *LockNames) error {
	return d.ops.LockWait(ctx, tx, name, wait, names)
}

// LockCleanup deletes the coord_locks rows of names created longer ago
// than age, at most batch, skipping rows being locked, in tx — a READ
// COMMITTED transaction (no gap locks on the MySQL family). A deleted
// name's next lock creates (MySQL family) or registers (PostgreSQL) it
// again.
func (d *Dialect) LockCleanup(ctx context.Context, tx Executor, age time.Duration, batch int) (int64, error) {
	return d.ops.LockCleanup(ctx, tx, age, batch)
}

// OutboxCleanup deletes up to batch published messages older than age,
// oldest ids first, locking only the rows it deletes (autocommit on x).
func (d *Dialect) OutboxCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	return d.ops.OutboxCleanup(ctx, x, age, batch)
}

// SetIdleTimeout bounds how long the server lets tx's session sit idle in
// a transaction (milliseconds; see coord.Client.SetIdleTimeout).
func (d *Dialect) SetIdleTimeout(ctx context.Context, tx Executor, ms int64) error {
	return d.ops.SetIdleTimeout(ctx, tx, ms)
}

// TxIdleTimeout is SetIdleTimeout where the setting ends with tx
// (PostgreSQL's SET LOCAL); where it would outlive tx on a pooled
// connection (MySQL/MariaDB: session variables) it sets nothing and
// reports false.
func (d *Dialect) TxIdleTimeout(ctx context.Context, tx Executor, ms int64) (bool, error) {
	return d.ops.TxIdleTimeout(ctx, tx, ms)
}

// LeaseAcquire takes the lease when free, expired or already owner's, in
// autocommit statements that hold no row lock across round trips, and
// returns the row as it then is (Owner tells who won). hwm is the client's
// failover-epoch high-water mark: a server in an older epoch refuses with
// ErrStalePrimary (every statement below that takes hwm does).
func (d *Dialect) LeaseAcquire(ctx context.Context, pool Executor, l LeaseSlot) (LeaseRow, error) {
	return d.ops.LeaseAcquire(ctx, pool, l.withQueue())
}

// LeaseRenew extends a live lease held by l.Owner with l.Token.
func (d *Dialect) LeaseRenew(ctx context.Context, pool Executor, l LeaseSlot) (Renewal, error) {
	return d.ops.LeaseRenew(ctx, pool, l.Name, l.Owner, l.Token, l.TTLMicros, l.HWM)
}

// LeaseRelease ends the live lease l.Name held by l.Owner with l.Token,
// keeping its row (and so its token); false when the lease was not live or
// not held so. It waits until the transactions FenceLease admitted for the
// lease ended, and wakes the waiter heading its queue (l.Queue), if one
// waits. On PostgreSQL it commits without waiting for its flush.
func (d *Dialect) LeaseRelease(ctx context.Context, pool Executor, l LeaseSlot) (bool, error) {
	return d.ops.LeaseRelease(ctx, pool, l.withQueue())
}

// LeaseReleaseWaking is LeaseRelease that also wakes the queue's
// observers with l.Observed (an election's), and on PostgreSQL the
// listeners of channel (observers of a release before migration 25). The
// release waits for its flush there (an observer that saw the end must
// not see the lease live again after a crash).
func (d *Dialect) LeaseReleaseWaking(ctx context.Context, pool Executor, l LeaseSlot, channel string) (bool, error) {
	return d.ops.LeaseReleaseWaking(ctx, pool, l.withQueue(), channel)
}

// LeaseQueue is the name of the advisory lock that the waiter at the head
// of lease name's queue holds (coord.AcquireWait, PostgreSQL): the prefix
// "sqlcoord.lease-queue:" and the first 16 bytes of the SHA-256 of the
// name's UTF-8 bytes, in hex. It is part of the lock protocol: every
// version that waits or releases must name the queue the same way.
func LeaseQueue(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sqlcoord.lease-queue:" + hex.EncodeToString(sum[:16])
}

// LeaseSlot names a lease and what an acquire or renewal asks for: the
// owner, the token held (renewal), the time to live in microseconds and
// the client's failover-epoch high-water mark (0: no check).
type LeaseSlot struct {
	Name, Owner    string
	Token          int64
	TTLMicros, HWM int64
	// Queue is the queue whose head alone may take the lease when it is
	// free, and which its release wakes: "" means the lease's own name
	// (a semaphore's permits share "semaphore:" + its name).
	Queue string
	// Observed: the release also wakes the queue's observers.
	Observed bool
	// Ticket is the caller's ticket of Queue (0: none): on PostgreSQL an
	// acquire that grants the lease deletes it in the same statement
	// (LeaseRow.TicketDropped), saving the waiter a round trip and a
	// flush before it holds the lease; elsewhere the caller deletes it.
	Ticket int64
}

func (l LeaseSlot) withQueue() LeaseSlot {
	if l.Queue == "" {
		l.Queue = l.Name
	}
	return l
}

// IdemKey is an idempotency key to register: its scope and key, the
// request fingerprint, how long to wait for another transaction holding
// it (LockMicros) or, with NoWait, not at all. Table is what the caller's
// earlier claims found coord_idempotency to be (IdemResult.Table): a
// claim that expects a table partitioned by period skips the statement
// that writes a plain table's one row. It is a hint only: wrong either
// way, the claim costs one statement more and keeps its guarantee (the
// periods a key claims are decided in the database, by coord_periods).
type IdemKey struct {
	Scope, Key  string
	Fingerprint []byte
	LockMicros  int64
	NoWait      bool
	Table       KeyTable
}

// KeyTable is how coord_idempotency is laid out, as a claim saw it.
type KeyTable int32

const (
	// KeyTableUnknown: the claim did not find out.
	KeyTableUnknown KeyTable = iota
	// KeyTablePlain: one row per key (not partitioned by period).
	KeyTablePlain
	// KeyTablePartitioned: partitioned by period (partitions.EnableKeys).
	KeyTablePartitioned
)

// IdemResult is the outcome of a key's claim: Inserted when the key was
// new (every row it should have went in), and the table's layout when the
// claim found it out.
type IdemResult struct {
	Inserted bool
	Table    KeyTable
}

// FenceAdvance raises the fence of resource to token inside tx unless a
// newer token has written; false when refused. The row stays locked until
// tx ends.
func (d *Dialect) FenceAdvance(ctx context.Context, tx Executor, resource string, token, hwm int64) (bool, error) {
	return d.ops.FenceAdvance(ctx, tx, resource, token, hwm)
}

// FencedUpdateRow runs the fenced update of a caller's table built from
// validated identifiers (see FencedUpdate) and reports whether the row
// accepted the token — true also when the update changed no value, on
// every driver setting (MySQL's clientFoundRows is not needed).
func (d *Dialect) FencedUpdateRow(ctx context.Context, tx Executor, r FencedRow) (bool, error) {
	q, check, args, err := d.fencedStatements(r)
	if err != nil {
		return false, err
	}
	return d.ops.FencedUpdate(ctx, tx, FencedWrite{Query: q, Args: args, Check: check, Key: r.Key, Token: r.Token, HWM: r.HWM})
}

// FencedWrite is one fenced UPDATE as Operations.FencedUpdate runs it:
// Query (its Args) changes the row only when the fence admits Token;
// Check reads the row's fence for Key when the update changed nothing
// (MySQL family: an update that wrote equal values reports 0 rows).
type FencedWrite struct {
	Query, Check string
	Args         []any
	Key          any
	Token, HWM   int64
}

// IdemInsert registers an idempotency key as pending in tx; not Inserted
// when it exists. With k.NoWait it fails at once (ErrLockTimeout) when another
// transaction holds the key, leaving tx usable.
func (d *Dialect) IdemInsert(ctx context.Context, tx Executor, k IdemKey) (IdemResult, error) {
	return d.ops.IdemInsert(ctx, tx, k)
}

// IdemRecord records an idempotency key as done with its response in tx
// (Keys.Record); not Inserted when it exists (after waiting for a
// transaction that holds it).
func (d *Dialect) IdemRecord(ctx context.Context, tx Executor, k IdemKey, response []byte) (IdemResult, error) {
	return d.ops.IdemRecord(ctx, tx, k, response)
}

// OutboxMark marks the published messages ids in tx in one statement
// (MySQL family: one per 1,000 ids) — or deletes them with deleteRows.
func (d *Dialect) OutboxMark(ctx context.Context, tx Executor, ids []int64, deleteRows bool) error {
	if len(ids) == 0 {
		return nil
	}
	return d.ops.OutboxMark(ctx, tx, ids, deleteRows)
}

// JobClaim inserts the run of a slot's shard in one autocommit statement
// and returns its attempt number (the failover epoch's first attempt: 1
// until the first fork) — claimed false when the run already exists.
func (d *Dialect) JobClaim(ctx context.Context, pool Executor, j JobSlot, hwm int64) (attempt Issued, claimed bool, err error) {
	return d.ops.JobClaim(ctx, pool, j, hwm)
}

// JobTakeover gives a stale or rerun-marked run to j.Owner as a new
// attempt and returns its number (attempt+1, or at least the failover
// epoch's first attempt); ok false when someone else was first.
func (d *Dialect) JobTakeover(ctx context.Context, pool Executor, j JobSlot, attempt, graceMicros, hwm int64) (newAttempt Issued, ok bool, err error) {
	return d.ops.JobTakeover(ctx, pool, j, attempt, graceMicros, hwm)
}

// JobFailure is a failed attempt recorded under a retry policy.
type JobFailure struct {
	Slot          JobSlot // job, fire, shard
	Attempt       int64
	Error         string
	Permanent     bool  // dead now, whatever the count
	MaxAttempts   int   // dead when failures + 1 reaches it
	BackoffMicros int64 // retry_at = now + this
}

// JobFail records f in the run's row when attempt f.Attempt is still the
// running one: 'retry' with retry_at, or 'dead'; failures + 1 is counted
// by the row. It returns the rows updated (0: superseded or finished).
func (d *Dialect) JobFail(ctx context.Context, pool Executor, f JobFailure) (int64, error) {
	return d.ops.JobFail(ctx, pool, f)
}

// SegmentAdvance moves a tag's max_id forward by step (above the failover
// epoch's base) in tx and returns the new max_id.
func (d *Dialect) SegmentAdvance(ctx context.Context, tx Executor, tag string, step int, hwm int64) (Issued, error) {
	return d.ops.SegmentAdvance(ctx, tx, tag, step, hwm)
}

// WorkerEpochReady records the failover epoch if new and reports whether
// snowflake worker ids may be granted in it: at once in the epoch a
// database started in, otherwise only once waitMicros (a lease TTL plus
// margin) have passed since the epoch began.
func (d *Dialect) WorkerEpochReady(ctx context.Context, pool Executor, waitMicros, hwm int64) (EpochGrace, error) {
	return d.ops.WorkerEpochReady(ctx, pool, waitMicros, hwm)
}

// EpochGrace is WorkerEpochReady's answer: Ready, or the time Left until
// it will be (by the database's clock), in failover epoch Epoch.
type EpochGrace struct {
	Ready bool
	Epoch int64
	Left  time.Duration
}

// EpochCheck is for a statement that refuses a stale primary and changed
// nothing (a job fence or completion with the client's high-water mark
// hwm above 0): an error matching ErrStalePrimary when that is why, or
// retry when the server's history had no epoch recorded yet (it now has:
// run the statement once more). PostgreSQL raises in the statement
// itself: (false, nil).
func (d *Dialect) EpochCheck(ctx context.Context, x Executor, hwm int64) (retry bool, err error) {
	return d.ops.EpochCheck(ctx, x, hwm)
}

// EpochAdvance starts a new failover epoch for the history the server
// writes on and returns its base.
func (d *Dialect) EpochAdvance(ctx context.Context, x Executor) (int64, error) {
	return d.ops.EpochAdvance(ctx, x)
}

// EndSession ends the server session named by SessionID's id and start;
// a session already gone is not an error.
func (d *Dialect) EndSession(ctx context.Context, pool Executor, id, start int64) error {
	return d.ops.EndSession(ctx, pool, id, start)
}

// UUIDValue is a UUID as this dialect's uuid column takes it.
func (d *Dialect) UUIDValue(u [16]byte) any { return d.ops.UuidValue(u) }

// UUIDColumnType is the column type sqlcoord recommends for UUIDs.
func (d *Dialect) UUIDColumnType() string { return d.ops.UuidColumnType() }

// errLockHeld is ErrLocked when the lock statement skipped the lock (or
// a concurrent creator held it) rather than failing.
var errLockHeld = &Error{Kind: ErrLocked}

// SagaRecord is a saga driver's fenced change: the transaction's new
// state and, when Idx >= 0, its branch Idx's.
type SagaRecord struct {
	GID, Claim           string
	Status               string
	Step, Tries          int
	Reason, Err          string
	Stuck, Keep, Durable bool
	DueMicros            int64
	Idx                  int
	BranchStatus         string
	BranchTries          int
	BranchErr            string
}

// SagaRecord writes r in one autocommit statement; ok false when the
// fence did not hold (the claim is no longer r.Claim). Not Durable: the
// commit does not wait for the WAL flush where the dialect can.
func (d *Dialect) SagaRecord(ctx context.Context, x Executor, r SagaRecord) (ok bool, err error) {
	return d.ops.SagaRecord(ctx, x, r)
}

// SagaClaim asks for up to Max due global transactions (GID: that one
// only, if due) for a driver.
type SagaClaim struct {
	GID, Token, Owner string
	LeaseMicros       int64
	Max               int
}

// SagaClaimed is a global transaction a claim took.
type SagaClaimed struct {
	GID, Mode, Status     string
	Step, Branches, Tries int
	Attempt, LeftMicros   int64 // LeftMicros: until the forward deadline
}

// SagaClaim claims what c asks for. PostgreSQL: one UPDATE … RETURNING
// (relaxed commit) on x. MySQL family, which has no UPDATE … RETURNING:
// a named transaction in one UPDATE then a read; the oldest due ones in
// a pick (FOR UPDATE SKIP LOCKED), an UPDATE and a read — x must then be
// a READ COMMITTED transaction (SagaClaimInTx), which takes no gap locks,
// so Begin's inserts never wait for a claim.
func (d *Dialect) SagaClaim(ctx context.Context, x Executor, c SagaClaim) ([]SagaClaimed, error) {
	return d.ops.SagaClaim(ctx, x, c)
}

// SagaClaimInTx reports whether a claim of the oldest due transactions
// (no gid) must run in a transaction of the caller's (MySQL family).
func (d *Dialect) SagaClaimInTx() bool { return d.q.Saga.Claim == "" }

// SagaCleanup deletes up to batch ended global transactions older than
// age, with their branches, in x (a READ COMMITTED transaction).
func (d *Dialect) SagaCleanup(ctx context.Context, x Executor, age time.Duration, batch int) (int64, error) {
	return d.ops.SagaCleanup(ctx, x, age, batch)
}

// scanSagaClaims reads claimed rows (SagaQueries.Claim's columns).
func scanSagaClaims(rows Rows, err error) ([]SagaClaimed, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SagaClaimed
	for rows.Next() {
		var c SagaClaimed
		if err := rows.Scan(&c.GID, &c.Mode, &c.Status, &c.Step, &c.Branches, &c.Attempt, &c.Tries, &c.LeftMicros); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
