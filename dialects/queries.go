package dialects

import (
	"strconv"
	"strings"
)

// Queries is the text of every statement sqlcoord sends. Each dialect file
// fills it completely, so a reviewer can read all SQL for one database in
// one place. Statements marked "template" contain a %d or %s verb that the
// caller fills with a validated integer or a quoted identifier, never with
// caller data.
type Queries struct {
	// Console holds the read-only inspection statements of the web
	// console (package console).
	Console ConsoleQueries
	// Saga holds package saga's statements (global transactions).
	Saga SagaQueries
	// Version returns the server version string.
	Version string
	// WorkerEpochReady records when the server first saw its failover
	// epoch and returns whether worker ids may be granted: always before
	// the first promotion, afterwards once $1 µs (TTL + margin) have
	// passed since the epoch was first seen (PostgreSQL; MySQL family:
	// always true, no epoch).
	WorkerEpochReady string
	// EpochAdvance starts a new failover epoch (PostgreSQL: and returns
	// its base); empty where the dialect has none. MySQL family: EpochRead
	// reads the epoch (NULL: this server's history is not the newest
	// recorded), EpochEnsure records a new one (arg: reason).
	EpochAdvance, EpochRead, EpochEnsure string
	// EpochRun records the server's current run (MySQL family: a row in
	// the MEMORY table coord_run, empty after every start) and EpochKnown
	// counts this server's recorded histories (to name a new run as one).
	EpochRun, EpochKnown string
	// EpochLog (MySQL family) appends the epoch just recorded for this
	// server to coord_fork_log, the history of every epoch.
	EpochLog string
	// EpochList lists coord_forks: history, base, first_seen, reason,
	// current.
	EpochList string
	// JobAttempt (MySQL family) reads the attempt of a slot's shard after
	// a claim or takeover; JobClaimReturning (MariaDB) is JobClaim
	// returning it.
	JobAttempt, JobClaimReturning string
	// OutboxPublishedBatch / OutboxDeleteBatch mark or delete published
	// messages by id in one statement: PostgreSQL takes the ids as one
	// array argument; MySQL's is a template whose %s is the list of ?
	// placeholders and %d their number (ORDER BY id LIMIT n).
	OutboxPublishedBatch, OutboxDeleteBatch string
	// --- web sessions (coord_sessions, package session) ---
	// Times are the database's; durations are µs.

	// WebSessionInsert: id_hash, user_id, data, idle µs, absolute µs,
	// absolute µs.
	WebSessionInsert string
	// WebSessionGet reads a live session. Args: id_hash. Columns: user_id,
	// data, version, created_at, last_seen_at, idle_expires_at,
	// abs_expires_at, the database's now.
	WebSessionGet string
	// WebSessionGetForUpdate is WebSessionGet locking the row.
	WebSessionGetForUpdate string
	// WebSessionTouch slides the idle expiry, only when the last renewal
	// is older than the given age. Args: idle µs, id_hash, age µs.
	WebSessionTouch string
	// WebSessionSave writes data if the version still matches. Args:
	// data, idle µs, id_hash, version.
	WebSessionSave string
	// WebSessionCopy inserts a rotated session. Args: new id_hash, user_id,
	// data, version, created_at, idle µs, abs_expires_at, abs_expires_at.
	WebSessionCopy string
	// WebSessionUpsert writes data with an absolute expiry given by the
	// caller (scs's Commit). Args: id_hash, data, idle µs, expiry, expiry, user id.
	WebSessionUpsert string
	// WebSessionDelete, WebSessionDeleteUser: by id_hash / by user_id.
	WebSessionDelete, WebSessionDeleteUser string
	// WebSessionCleanup deletes expired sessions. Args: grace µs, limit.
	WebSessionCleanup string
	// WebSessionStats: live sessions, distinct users, expired rows.
	WebSessionStats string
	// JobSlotTotal records a slot's shard total as the number of live
	// members of a group (at least 1) unless the slot has one. Args: job,
	// fire time, group. JobSlotRead reads it. Args: job, fire time.
	JobSlotTotal, JobSlotRead string
	// JobCleanup deletes up to N ended runs (succeeded, failed, skipped,
	// dead) of one job fired more than an age ago, oldest first, through
	// the primary key (job, fire_time, …); JobSlotCleanup the job's
	// recorded shard totals of those slots. Args: job, age µs, N.
	JobCleanup, JobSlotCleanup string

	// --- elections and semaphores (coord_election_terms, coord_semaphores) ---

	// ElectionTerm records (or, for the same leader, updates the value of)
	// the term a leader holds, only while its lease is live; PostgreSQL:
	// and notifies the election's observers. Rows affected: 0 when the
	// lease is no longer held. Args: election, value, lease name, owner,
	// token.
	ElectionTerm string
	// ElectionLeader reads an election's lease and its term's row. Args:
	// election, lease name. Columns: owner, token, acquired_at,
	// expires_at, database now, value (NULL before the term's row),
	// updated_at (NULL likewise).
	ElectionLeader string
	// ElectionTerms lists terms from a term on, oldest first. Args:
	// election, first term, limit. Columns: term, leader, value,
	// elected_at, updated_at.
	ElectionTerms string
	// ElectionPrune deletes an election's terms below a term that began
	// over an hour ago (a failover's jump in terms prunes nothing recent).
	// Args:
	// election, term.
	ElectionPrune string
	// ElectionList lists elections with their newest term. Args: limit.
	// Columns: name, term, leader, value, elected_at.
	ElectionList string
	// LeaseReleaseNotify (PostgreSQL; empty elsewhere, where LeaseRelease
	// serves) is LeaseRelease that always wakes the listeners of a second
	// channel: an election's observers, a semaphore's waiters. Args: lease
	// name, owner, token, channel. Unlike LeaseRelease it waits for the
	// flush: an observer that saw a term end must not see it live again
	// after a crash. Dialect.LeaseReleaseWaking runs it.
	LeaseReleaseNotify string
	// SemaphoreGet reads a semaphore's permit count. Args: name.
	SemaphoreGet string
	// SemaphoreInit records a permit count unless one is recorded. Args:
	// name, permits.
	SemaphoreInit string
	// SemaphoreSet records a permit count. Args: name, permits.
	SemaphoreSet string
	// SemaphoreHolders lists the live leases named prefix + 4 digits,
	// between lo and hi. Args: lo, hi, prefix. Columns: name,
	// owner, token, acquired_at, expires_at, database now.
	SemaphoreHolders string
	// SemaphoreRevoke ends the live leases named prefix + 4 digits between
	// lo and hi (the slots above a lowered count). Args: lo, hi, prefix.
	SemaphoreRevoke string
	// SemaphoreList lists semaphores. Args: limit. Columns: name, permits,
	// updated_at.
	SemaphoreList string

	// --- membership (coord_members) ---

	// MemberJoin inserts or refreshes a member. Args: group, member, meta,
	// TTL µs.
	MemberJoin string
	// MemberHeartbeat extends a live member. Args: TTL µs, group, member.
	MemberHeartbeat string
	// MemberLeave removes a member. Args: group, member.
	MemberLeave string
	// MemberList lists a group's live members by id. Args: group. Columns:
	// member_id, meta, joined_at, heartbeat_at, expires_at.
	MemberList string
	// MemberCleanup deletes members expired for longer than µs. Args: µs,
	// limit.
	MemberCleanup string
	// ReadOnly returns true when the server refuses writes: a hot standby
	// or read-only transactions by default (PostgreSQL), read_only or
	// innodb_read_only (MySQL/MariaDB replicas).
	ReadOnly string

	// LeaseAcquireReturning / FenceAdvanceReturning (MariaDB; empty for
	// MySQL 8, which has no RETURNING): LeaseAcquire and FenceAdvanceChecked
	// returning the row as the statement left it — owner, token,
	// expires_at / fence — so each is one round trip.
	LeaseAcquireReturning, FenceAdvanceReturning string
	// FenceAdvanceChecked raises coord_fences.fence to the token when the
	// token is not older than the fence and above the current failover
	// epoch's base (a token at or below it was issued on a history that
	// ended: before a promotion, a restart or a restore), creating the row
	// on first use; it refuses (ErrStalePrimary) a server in an epoch
	// older than the client's high-water mark. Always used. On PostgreSQL
	// one row is affected when it is accepted.
	// JobFenceChecked, JobFinishChecked: the job statements refusing a
	// stale primary the same way, the mark their last argument; used when
	// the mark is above 0.
	FenceAdvanceChecked, JobFenceChecked, JobFinishChecked string

	// --- row locks (coord_locks) ---

	// LockAdvTry / LockAdvWait (PostgreSQL) take the advisory lock of a
	// name's hash without waiting / waiting under lock_timeout (see
	// postgres.go for the columns). LockRegister records a name for the
	// console; LockHashTry/Wait take only the hash lock. LockLegacyRead,
	// LockCreate, LockAssignID, LockAdvTryID and LockAdvWaitID serve the
	// older protocols during a rolling upgrade. LockProtocolGet/Set read
	// and write coord_lock_protocol (row_locks, id_locks); LockAssignIDs
	// gives every registered name an id. All empty on the MySQL family.
	LockAdvTry, LockAdvWait, LockRegister, LockHashTry, LockHashWait, LockLegacyRead string
	// LockAdvTryKnown / LockAdvWaitKnown: the same without looking for
	// the name's row (see LockNames).
	LockAdvTryKnown, LockAdvWaitKnown                     string
	LockCreate, LockAssignID, LockAdvTryID, LockAdvWaitID string
	LockProtocolGet, LockProtocolSet, LockAssignIDs       string
	// LockProtocolOpen lists the transactions open in other sessions
	// (PostgreSQL); LockProtocolStillOpen counts those of a list still
	// open. SetLockProtocol waits for them after a switch.
	LockProtocolOpen, LockProtocolStillOpen string
	// LockCleanup deletes (PostgreSQL) or picks for deletion (MySQL
	// family) the rows of names created longer ago than the given age
	// (µs), at most N (args: age, N), skipping rows being locked. Run in
	// a READ COMMITTED transaction (see Dialect.LockCleanup).
	LockCleanup string
	// LockNowait locks the name for the rest of the transaction, or fails
	// at once without spoiling the transaction. MySQL family: an INSERT …
	// ON DUPLICATE KEY UPDATE that creates or locks the name's row, whose
	// lock wait error rolls back the statement only. PostgreSQL (rolling
	// upgrade only): the row lock, FOR UPDATE SKIP LOCKED (no row: held).
	LockNowait string
	// LockWait is LockNowait waiting at most the bound set by
	// LockWaitBegin (PostgreSQL) or the template's %d seconds (MySQL
	// family).
	LockWait string
	// LockWaitBegin returns the current bound and sets a new one (in
	// milliseconds) for the rest of the statement sequence; LockWaitEnd
	// restores the value LockWaitBegin returned. Empty when LockWait is a
	// per-statement template.
	LockWaitBegin, LockWaitEnd string
	// IdleTxTimeoutSet sets, for this session, how long the server lets a
	// transaction sit idle before it kills the session and so frees its
	// locks (the bound on a frozen holder). Argument: milliseconds.
	IdleTxTimeoutSet string
	// IdleTxTimeoutReset (MySQL family) puts the session's value back to
	// the server's default (see sqlcoord.Open).
	IdleTxTimeoutReset string

	// --- leases (coord_leases) ---

	// LeaseAcquire takes the lease when free, expired or already ours, in
	// one autocommit statement. Args: name, owner, ttl in microseconds.
	// PostgreSQL returns the row on success and nothing otherwise; MySQL
	// reads the row with LeaseRead afterwards.
	LeaseAcquire string
	// LeaseRead reads the current row without locking it (MySQL follow-up
	// to LeaseAcquire, as a separate autocommit statement: no lock is held
	// across round trips). Args: name.
	LeaseRead string
	// LeaseRenew extends a live lease held by owner with token, in one
	// autocommit statement. Args: ttl µs, name, owner, token. Affects one
	// row or none; PostgreSQL returns the new expiry, MySQL reads it with
	// LeaseExpiry (args: name, owner, token) afterwards, without a lock.
	LeaseRenew  string
	LeaseExpiry string
	// LeaseRelease ends a live lease held by owner with token, keeping the
	// row (and so the token) in place. Args: name, owner, token; on
	// PostgreSQL also LeaseQueue(name). Dialect.LeaseRelease passes them.
	LeaseRelease string
	// LeaseGet reads a lease with the database's idea of "now".
	// Args: name. Columns: owner, token, expires_at, now.
	LeaseGet string
	// Now returns the database's current time.
	Now string

	// --- fences (coord_fences and callers' own tables) ---

	// FenceRead reads the fence under lock (MySQL follow-up). Args: resource.
	FenceRead string
	// Fenced updates of callers' own tables are built by
	// Dialect.FencedUpdate from validated, quoted identifiers (fenced.go).

	// --- txn: idempotency keys (coord_idempotency) ---

	// IdemInsert registers a key as pending unless it exists, without
	// failing on a duplicate. A concurrent inserter of the same key makes
	// it wait for that transaction. Where keys may be partitioned by
	// period (PostgreSQL, MariaDB) a key is a row in each period it
	// claims, decided by the statement (see pgIdemClaim): PostgreSQL's
	// returns the rows wanted, the rows inserted and their periods;
	// MariaDB's inserts the first period's row and returns it (see
	// IdemInsertRest); MySQL 8's (never partitioned) affects 1 row or 0.
	// Args: scope, key, fingerprint, lock µs.
	IdemInsert string
	// IdemInsertNowait is IdemInsert that fails at once (lock timeout) when
	// another transaction holds the key. On PostgreSQL it is preceded by
	// LockWaitBegin with a 1 ms bound.
	IdemInsertNowait string
	// IdemInsertDone records a key already done, with its response, when
	// it is new (Keys.Record): 1 row inserted, 0 on a conflict (after
	// waiting for a concurrent inserter). Args: scope, key, fingerprint,
	// response.
	IdemInsertDone string
	// IdemUndo deletes the rows of a key that a claim inserted when it
	// met the key in another of its periods (the claim then reports the
	// key as existing). Args: scope, key, periods (comma-separated).
	IdemUndo string
	// IdemInsertRest (MariaDB) writes a claimed key's rows of the other
	// periods after IdemInsert or IdemInsertDone, which then return their
	// row (see mariaDBIdemClaim); empty where those count rows affected
	// (MySQL 8, never partitioned).
	IdemInsertRest string
	// IdemInsertPlain and IdemInsertDonePlain insert the one row (period
	// 0) of a key on a table not partitioned by period, and nothing where
	// coord_periods says it is (the claims above run then): one cheap
	// statement for a new key on a plain table. Rows affected: 1 or 0.
	// Empty where the claims are that statement already (MySQL 8).
	IdemInsertPlain, IdemInsertDonePlain string
	// IdemInsertPlainNowait is IdemInsertPlain failing at once (lock
	// timeout) when another transaction holds the key (MariaDB).
	IdemInsertPlainNowait string
	// IdemRead reads a key, its newest period's row (a share-locking read
	// on MySQL so REPEATABLE READ sees the latest row). Columns: fingerprint, state, response, locked (bool:
	// locked_until in the future). Args: scope, key.
	IdemRead string
	// IdemTakeover claims a stale pending key. Args: lock µs, fingerprint,
	// scope, key.
	IdemTakeover string
	// IdemComplete marks a pending key done with its response. Args:
	// response, scope, key.
	IdemComplete string
	// IdemAbandon deletes a pending key so a retry may run. Args: scope, key.
	IdemAbandon string
	// IdemCleanup deletes up to N done keys older than an age. Args: age µs, N.
	IdemCleanup string

	// --- txn: TCC / saga barrier (coord_txn_barrier) ---

	// BarrierInsert inserts a barrier row, 0 rows affected when it exists.
	// Args: gid, branch, op, reason.
	BarrierInsert string
	// BarrierCleanup deletes up to N rows older than an age. Args: age µs, N.
	BarrierCleanup string

	// --- txn: commit markers (coord_txn_commits) ---

	// SessionID identifies the server session running the statement, so
	// that another session can later end it and see it gone. Columns: id,
	// start (an int that, with id, names one session even if ids are
	// reused; 0 where ids are never reused).
	SessionID string
	// SessionEnd ends a session named by SessionID's id and start (Args:
	// id, start). MySQL: a template, the id is formatted into
	// the text with %d, start is unused.
	SessionEnd string
	// SessionAlive counts sessions with that id and start (0 or 1). Args:
	// id, start.
	SessionAlive string

	CommitMarkerInsert  string // Args: id
	CommitMarkerExists  string // Args: id
	CommitMarkerCleanup string // Args: age µs, N

	// --- ids: segments (coord_id_segments) ---

	// SegmentCreate creates a tag if missing. Args: tag, start max_id, step.
	SegmentCreate string
	// SegmentAdvance moves max_id forward by step. Args: step, step, tag.
	// PostgreSQL returns max_id; MySQL reads it with SegmentRead in the
	// same transaction.
	SegmentAdvance string
	SegmentRead    string // Args: tag. Columns: max_id.

	// --- ids: snowflake worker leases (coord_id_workers) ---

	// WorkerFree locks the lowest worker id whose lease expired more than a
	// margin ago. Args: margin µs. Columns: worker_id, last_ms, released.
	WorkerFree string
	// WorkerMax returns the highest worker id in use (NULL when none).
	WorkerMax string
	// WorkerInsert adds a new worker id for owner. Args: id, owner, ttl µs.
	WorkerInsert string
	// WorkerTake gives a locked, expired worker id to owner. Args: owner,
	// ttl µs, id, margin µs.
	WorkerTake string
	// WorkerHeartbeat extends a live lease and records the newest issued
	// timestamp. Args: ttl µs, last_ms, id, owner.
	WorkerHeartbeat string
	// WorkerRelease ends a lease, recording last_ms. Args: last_ms, id, owner.
	WorkerRelease string

	// --- jobs (coord_job_runs) ---

	// JobClaim inserts a slot's run, 0 rows affected when it exists.
	// Args: see the dialect's file (job, fire, shard, total, status, owner,
	// reason and the epoch high-water mark).
	JobClaim string
	// JobHeartbeat refreshes a running attempt. Args: job, fire, shard, attempt.
	JobHeartbeat string
	// JobFinish records the result of a running attempt. Args: status,
	// error, job, fire, shard, attempt.
	JobFinish string
	// JobFail records a failed attempt under a retry policy: 'retry' with
	// retry_at, or 'dead' after the last attempt or a permanent error
	// (failures + 1 counted in the row). Args: see Dialect.JobFail.
	JobFail string
	// JobOutcome reads a run's status, failures and retry_at. Args: job,
	// fire, shard.
	JobOutcome string
	// JobQueued counts runs of a job planned before a fire time that are
	// running, waiting to retry or queued. Args: job, fire.
	JobQueued string
	// JobFence locks a running attempt's row for the rest of the caller's
	// transaction; no row when the attempt is no longer current. Args: job,
	// fire, shard, attempt.
	JobFence string
	// JobGet reads a run's status and attempt. Args: job, fire, shard.
	JobGet string
	// JobRegister records a job's definition (upsert). Args: name,
	// schedule, time zone, shards.
	JobRegister string
	// JobDef reads a registered job. Args: name. Columns: schedule, tz,
	// shards, updated_at (last registration).
	JobDef string
	// JobNames lists registered jobs. Columns: name, schedule, tz, shards,
	// updated_at.
	JobNames string
	// JobStale lists runs of a job that may be taken over: running with a
	// heartbeat older than the grace, or marked for rerun. Args: job, grace
	// µs. Columns: fire_time, shard, shard_total, attempt, status, failures.
	JobStale string
	// JobTakeover bumps the attempt of a stale or rerun run seen at attempt.
	// Args: owner, job, fire, shard, attempt, grace µs.
	JobTakeover string
	// JobRerunMark marks finished runs of a slot for rerun. Args: job, fire.
	JobRerunMark string
	// JobRerunInsert creates a rerun row for a slot shard that never ran.
	// Args: job, fire, shard, total.
	JobRerunInsert string
	// JobOverlap counts live runs of a job planned before a fire time.
	// Args: job, fire, grace µs.
	JobOverlap string
	// JobPartial lists a job's slots of the last day, planned before
	// now - age, with fewer shard runs than shards. Args: job, age µs.
	// Columns: fire_time, shard_total.
	JobPartial string
	// JobLastFire is the newest recorded fire time of a job. Args: job.
	JobLastFire string
	// JobList lists runs of a job in [from, to). Args: job, from, to.
	JobList string

	// --- outbox (coord_outbox, coord_inbox) ---

	// OutboxInsert enqueues one message. Args: topic, key (NULL ok),
	// payload, headers, delay µs, msg_id (UUID text).
	OutboxInsert string
	// OutboxInsertWake is OutboxInsert that also wakes a sleeping relay
	// when the transaction commits, in the same round trip (PostgreSQL:
	// the INSERT in a CTE beside pg_notify, sent only while a relay holds
	// the sleep lock — see pgOutboxSleep; MySQL: OutboxInsert, relays
	// poll). Enqueue uses it for the last message of a call.
	OutboxInsertWake string
	// OutboxIDInsert records a message id the caller chose
	// (coord_outbox_ids, migration 28): its primary key refuses the id a
	// second time, across the outbox's partitions and after they are
	// dropped. Enqueue runs it before the message's insert. Args: msg_id.
	OutboxIDInsert string
	// OutboxIDCleanup deletes up to $2 rows of coord_outbox_ids recorded
	// longer than $1 µs ago (oldest first, skipping locked rows).
	OutboxIDCleanup string
	// OutboxSleepSettings sets the sleeping relay's transaction's
	// lock_timeout and idle_in_transaction_session_timeout. Args: both as
	// text ("50ms"). "" when the dialect has no sleep lock.
	OutboxSleepSettings string
	// OutboxSleep takes the sleep lock for the rest of the transaction,
	// waiting (up to lock_timeout) for producers that saw no sleeping
	// relay to commit.
	OutboxSleep string
	// OutboxSleeper reports whether a relay holds the sleep lock.
	OutboxSleeper string
	// OutboxWaitCommit (MariaDB; "" elsewhere) is the polling relay's
	// wake-up: a locking read of the newest outbox row, run at READ
	// COMMITTED (no gap lock: producers never wait on it), that waits for
	// the producer inserting it to commit — or returns at once when that
	// row is committed — for at most %s seconds (max_statement_time).
	OutboxWaitCommit string
	// The streaming relay (PostgreSQL logical replication; "" elsewhere).
	// OutboxStreamClaim locks the streamed ids ($1) still pending and due,
	// in id order: what the stream may publish (the others were published
	// by a polling relay, cancelled, or are delayed).
	OutboxStreamClaim string
	// OutboxStreamDelete deletes the published ids ($1), locked by
	// OutboxStreamClaim (DeleteOnPublish), if the streamer's lease ($2
	// name, $3 owner, $4 token) is still live: fewer rows than ids means
	// the lease was lost. Its transaction, like OutboxStreamClaimMark's,
	// commits with synchronous_commit off: the slot's position records
	// progress, and a mark or delete lost in a server crash leaves a row
	// that looks pending (a later polling pass publishes it again: a
	// duplicate after a crash, never a loss).
	OutboxStreamDelete string
	// OutboxStreamClaimMark (a stream keeping published rows) marks the
	// streamed ids ($1) still pending and due as published, locking them,
	// if the streamer's lease ($2 name, $3 owner, $4 token) is live, and
	// returns their ids; a row with id -1 instead
	// when the lease is not (no id is marked then). Published or not is
	// decided by the transaction's commit: the stream publishes between
	// this statement and COMMIT, and gives back what it did not publish
	// with OutboxStreamUnmark. One statement and one row version per
	// message fewer than a claim then a mark.
	OutboxStreamClaimMark string
	// OutboxStreamUnmark returns ids ($1) marked by OutboxStreamClaimMark in
	// the same transaction to pending (a failed publish, a dead letter, a
	// stop mid-batch).
	OutboxStreamUnmark string
	// OutboxStreamWake tells a streaming relay (through the WAL) that
	// messages became pending without an INSERT (a requeue).
	OutboxStreamWake string
	// OutboxSlots lists the replication slots of sqlcoord's streaming
	// relays on the current database with how much WAL each retains.
	OutboxSlots string
	// OutboxClaim locks up to N due pending rows, oldest first, skipping
	// rows other relays hold. Args: N. Columns: id, msg_id, topic,
	// msg_key, payload, headers, created_at, attempts.
	OutboxClaim string
	// OutboxClaimOrdered is OutboxClaim that only takes a keyed message when
	// no older message with the same key is pending.
	OutboxClaimOrdered string
	// OutboxCommitTSOn reports whether the server records commit times
	// (PostgreSQL track_commit_timestamp; empty: never, MySQL family).
	// OutboxClaimCommitTS and OutboxClaimOrderedCommitTS are the claims
	// whose created_at column is the message's commit time when known.
	OutboxCommitTSOn, OutboxClaimCommitTS, OutboxClaimOrderedCommitTS string
	// OutboxFailed records a failed attempt, with backoff, dead-lettering
	// at the limit. Args: error, backoff µs, max attempts, id.
	OutboxFailed string
	// OutboxDead marks a row dead at once (permanent failure). Args: error, id.
	OutboxDead string
	// OutboxRequeue makes dead rows pending again. Args: id, id (0: all dead).
	OutboxRequeue string
	// OutboxCancelLock locks a message row unless a relay holds it (SKIP
	// LOCKED) and returns its state. Args: msg_id.
	OutboxCancelLock string
	// OutboxState reads a message's state without locking. Args: msg_id.
	OutboxState string
	// OutboxCancel deletes a pending message. Args: msg_id.
	OutboxCancel string
	// OutboxListDead lists dead rows. Args: N. Columns: id, msg_id, topic, msg_key,
	// attempts, last_error, created_at.
	OutboxListDead string
	// OutboxStats counts rows per state, the age of the oldest pending
	// row in seconds and the pending rows whose last publish failed.
	// Columns: pending, published, dead, lag_s, failing.
	OutboxStats string
	// OutboxStreamFailed records a streaming relay's failed attempt at a
	// pending row it holds locked (PostgreSQL). Args: attempts, error, id.
	OutboxStreamFailed string
	// OutboxCleanup deletes (PostgreSQL) or picks for deletion (MySQL
	// family) up to N published rows older than an age; see
	// Dialect.OutboxCleanup.
	// Args: age µs, N.
	OutboxCleanup string
	// InboxInsert records (consumer, message id), 0 rows when seen before.
	InboxInsert string
	// InboxCleanup deletes up to N inbox rows older than an age. Args: age µs, N.
	InboxCleanup string
}

// ConsoleQueries are the web console's statements: read-only, bounded by a
// LIMIT argument, every age and time left computed by the database clock
// (seconds as float).
type ConsoleQueries struct {
	// Now: the database's clock (UTC).
	Now string
	// Leases: name, owner, token, expires_at, acquired_at, renewed_at,
	// seconds left (negative: expired). Live first. Args: N.
	Leases string
	// LocksHeld: lock names (coord_locks rows) held by an open transaction,
	// as far as the server exposes them: name, holder (backend pid /
	// thread id), user or application, client, transaction age, state.
	// Args: N. PostgreSQL shows every held name (row xmax joined with
	// the holder's transaction lock); MariaDB only names that someone
	// waits for (information_schema.INNODB_LOCKS lists contended locks).
	LocksHeld string
	// LockTxns: transactions holding row locks (MySQL family; empty for
	// PostgreSQL, whose held names say it all): holder, user, client, age,
	// rows locked, state. Args: N.
	LockTxns string
	// LockWaits: sessions waiting for a lock: waiter, user or
	// application, blockers (comma separated), seconds waited, statement.
	// Args: N.
	LockWaits string
	// OutboxSeries: messages published per minute over the last hour and
	// the largest insert→publish lag among them: minutes ago (0..59),
	// count, lag seconds.
	OutboxSeries string
	// KeyCounts: idempotency keys done, pending (in progress), stuck
	// (pending past locked_until).
	KeyCounts string
	// KeysPending: scope, key, age seconds, seconds until the claim may be
	// taken over (negative: stuck). Oldest first. Args: N.
	KeysPending string
	// MemberGroups: group, live members, expired rows. Args: N.
	MemberGroups string
}

// WithIdleTimeout folds into an outbox claim (OutboxClaim and its
// variants, after WithTopics; OutboxStreamClaim) the batch transaction's
// idle-in-transaction timeout, ms milliseconds: what TxIdleTimeout sets in
// a statement of its own, here set once when the claim starts, before it
// returns a row — a round trip less per batch. ok false where the dialect
// cannot (MySQL/MariaDB have no such per-transaction setting): q
// unchanged.
func (d *Dialect) WithIdleTimeout(q string, ms int64) (string, bool) {
	const where = "WHERE "
	if d.Family() != "postgres" || !strings.Contains(q, where) {
		return q, false
	}
	// an InitPlan: set once, when the claim starts, before it returns a row
	set := "(SELECT set_config('idle_in_transaction_session_timeout', '" + strconv.FormatInt(ms, 10) + "', true)) IS NOT NULL AND "
	return strings.Replace(q, where, where+set, 1), true
}

// WithTopics narrows a claim statement of the outbox (OutboxClaim and its
// variants, whose one parameter is the batch size) to rows of the given
// topics: a relay group's topic filter. args builds the statement's
// arguments for a batch of n. No topics: q unchanged.
func (d *Dialect) WithTopics(q string, topics []string) (string, func(n int) []any) {
	if len(topics) == 0 {
		return q, func(n int) []any { return []any{n} }
	}
	const where = "WHERE state = 'pending'"
	marks := make([]string, len(topics))
	for i := range topics {
		marks[i] = d.Placeholder(i + 2) // $2… on PostgreSQL (the batch size is $1)
	}
	q = strings.Replace(q, where, where+" AND topic IN ("+strings.Join(marks, ", ")+")", 1)
	return q, func(n int) []any {
		args := make([]any, 0, len(topics)+1)
		if !d.numbered {
			// ? placeholders go in text order: the topics come before LIMIT ?
			for _, t := range topics {
				args = append(args, t)
			}
			return append(args, n)
		}
		args = append(args, n)
		for _, t := range topics {
			args = append(args, t)
		}
		return args
	}
}
