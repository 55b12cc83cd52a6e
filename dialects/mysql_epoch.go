package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Failover epochs on the MySQL family (migration 16; the design is
// PostgreSQL's, see pgEpochBase). A history is a server writing as the
// primary, named by @@server_id, in one run of that server (migration 20):
// coord_run is a MEMORY table, empty whenever mariadbd starts — after a
// restart, a crash, or on a data directory restored from a snapshot or
// mariabackup, which cannot be told apart from the inside — and the
// first counter statement of a run records the run's id there. The epoch
// expression is the recorded base of this server's history when it is the
// newest one recorded and was recorded in this run, and NULL otherwise —
// a promoted replica's first counter statement, a server promoted again
// after rejoining, a new run: the statements then issue nothing, and
// the client records a new epoch (EpochEnsure, in the same connection)
// and runs them again. There are no stored functions (creating one needs
// SUPER or log_bin_trust_function_creators where binary logging is on),
// so that check happens in Go, after the statement, only when it did not
// issue.
//
// mysqlEpoch is the expression; Galera uses "(SELECT 0)": every commit is
// certified by the whole cluster, and nodes with their own server ids
// would take turns starting epochs.
const mysqlEpoch = `(SELECT f.base FROM coord_forks f WHERE f.server_id = @@server_id AND f.run = (SELECT r.id FROM coord_run r WHERE r.k = 1)
  AND f.base = (SELECT MAX(m.base) FROM coord_forks m))`

// mysqlQueueLetsIn is LeaseAcquire's condition that the caller may take
// a free lease: nobody else heads the queue (args: queue, queue).
var mysqlQueueLetsIn = `IF(attention & 1 OR name <> ?, COALESCE((` + mysqlHead("owner", "?") + `), VALUES(owner)), VALUES(owner)) = VALUES(owner)`

// mysqlOwnQueue is an acquire of a lease with its own queue that reads no
// ticket: a free lease whose row says a waiter may be queued (attention
// bit 1) is not taken but reported free and not ours (LeaseRow.Queued),
// and the caller runs the full statement, which reads the queue. A
// statement that names the queue's tables costs MariaDB their opening
// whether it reads them or not. Same args as stmt.
func mysqlOwnQueue(stmt string) string {
	if !strings.Contains(stmt, mysqlQueueLetsIn) {
		panic("dialects: LeaseAcquire without its queue check")
	}
	return strings.Replace(stmt, mysqlQueueLetsIn, `(attention & 1 = 0 AND name = ? AND ? IS NOT NULL)`, 1)
}

// mysqlEpochQueries sets the statements that issue or check counters with
// epoch as the failover epoch expression.
func mysqlEpochQueries(q *Queries, epoch string) {
	q.EpochRead = `SELECT ` + epoch
	if epoch == mysqlEpoch {
		// A new epoch for this server's history: above every recorded base
		// and the clock's (milliseconds since 2020 · 2²²). Arg: reason.
		q.EpochEnsure = `INSERT INTO coord_forks (server_id, base, first_seen, reason, run)
SELECT @@server_id, GREATEST(COALESCE(t.m, -1) + 1, (TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '2020-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000) << 22),
  UTC_TIMESTAMP(6), ?, (SELECT r.id FROM coord_run r WHERE r.k = 1) FROM (SELECT MAX(base) AS m FROM coord_forks) t
ON DUPLICATE KEY UPDATE base = GREATEST(base, VALUES(base)), first_seen = VALUES(first_seen), reason = VALUES(reason), run = VALUES(run)`
		// This run's id, recorded by the first caller (MEMORY: gone when
		// the server stops). A MEMORY table is locked whole: the insert
		// waits for every statement reading coord_run to end, and one of
		// them can be waiting for a row lock the inserting transaction
		// holds — a deadlock InnoDB does not see. So it waits at most a
		// second, then fails with 1205 (ErrLockTimeout) and the caller's
		// transaction is retried; this happens only in the first moments
		// of a run.
		q.EpochRun = `INSERT /*+ SET_VAR(lock_wait_timeout = 1) */ IGNORE INTO coord_run (k, id) VALUES (1, UUID())`
		// Why the server's history is not the newest recorded: whether
		// this server recorded one before (then this is a new run).
		q.EpochKnown = `SELECT COUNT(*) FROM coord_forks WHERE server_id = @@server_id`
		q.EpochAdvance = q.EpochEnsure
		// The epoch just recorded, appended to the history (migration 26).
		q.EpochLog = `INSERT IGNORE INTO coord_fork_log (base, history, first_seen, reason)
SELECT base, CAST(server_id AS CHAR), first_seen, reason FROM coord_forks WHERE server_id = @@server_id`
		// Every epoch the database has had (the log; a history a release
		// before migration 26 recorded, from coord_forks), oldest first.
		q.EpochList = `SELECT l.history, l.base, l.first_seen, l.reason,
  COALESCE(f.server_id = @@server_id AND f.run <=> (SELECT r.id FROM coord_run r WHERE r.k = 1) AND f.base = (SELECT MAX(m.base) FROM coord_forks m), FALSE)
FROM (SELECT history, base, first_seen, reason FROM coord_fork_log
  UNION ALL SELECT CAST(c.server_id AS CHAR), c.base, c.first_seen, c.reason FROM coord_forks c
    WHERE NOT EXISTS (SELECT 1 FROM coord_fork_log x WHERE x.base = c.base)) l
LEFT JOIN coord_forks f ON f.base = l.base
ORDER BY l.base`
	}
	// A new ownership — the lease free (expired or released) and nobody
	// else heading its queue, or ours but granted in an earlier epoch —
	// gets a token above the previous one and above the epoch base; a live
	// lease re-acquired by its owner keeps its token. A free lease goes
	// only to the head of its queue while the queue has a live ticket
	// (migration 25; the last argument names the queue). ON DUPLICATE KEY
	// UPDATE assigns left to right and later expressions see earlier
	// results, so the decisions are kept in session variables before owner
	// changes: @sqlcoord_free (free, and the queue lets the caller in),
	// @sqlcoord_take (it is the caller's now). A lease's own queue is
	// read only when the row's attention (migration 27) says a waiter may
	// be queued; a shared queue (a semaphore's) always (see also
	// mysqlOwnQueue). Nothing is inserted or changed when the epoch is
	// NULL or below the client's high-water mark.
	// Args: name, owner, ttl µs, high-water mark, queue, queue.
	q.LeaseAcquire = `INSERT INTO coord_leases (name, owner, token, expires_at, acquired_at, renewed_at)
SELECT ?, ?, e.b + 1, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
FROM (SELECT ` + epoch + ` AS b) e WHERE e.b >= ?
ON DUPLICATE KEY UPDATE
  acquired_at = IF((@sqlcoord_free := (expires_at <= UTC_TIMESTAMP(6)
      AND ` + mysqlQueueLetsIn + `))
    OR (owner = VALUES(owner) AND expires_at > UTC_TIMESTAMP(6) AND token < VALUES(token)), VALUES(acquired_at), acquired_at),
  token       = IF((@sqlcoord_take := (@sqlcoord_free OR (owner = VALUES(owner) AND expires_at > UTC_TIMESTAMP(6))))
    AND (@sqlcoord_free OR token < VALUES(token)), GREATEST(token + 1, VALUES(token)), token),
  owner       = IF(@sqlcoord_take, VALUES(owner), owner),
  renewed_at  = IF(@sqlcoord_take, VALUES(renewed_at), renewed_at),
  expires_at  = IF(@sqlcoord_take, VALUES(expires_at), expires_at)`
	// Non-locking reads after the autocommit statement: the upsert or
	// update is the only statement that locks the row, and its lock ends
	// with it, so a holder frozen between round trips blocks nobody. An
	// autocommit read sees the latest committed row. Columns: owner,
	// token, expires_at, epoch, free (then the queue's head is another).
	q.LeaseRead = `SELECT owner, token, expires_at, ` + epoch + `, expires_at <= UTC_TIMESTAMP(6) FROM coord_leases WHERE name = ?`
	// A lease granted in an earlier epoch cannot be renewed. Args: ttl µs,
	// name, owner, token, high-water mark.
	q.LeaseRenew = `UPDATE coord_leases SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, renewed_at = UTC_TIMESTAMP(6)
WHERE name = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6) AND token > ` + epoch + ` AND ` + epoch + ` >= ?`
	q.LeaseExpiry = `SELECT expires_at, COALESCE(` + epoch + `, 0) FROM coord_leases WHERE name = ? AND owner = ? AND token = ?`
	// Refuses (changes nothing) a token at or below the epoch's base —
	// issued on a history that ended — and a server older than the
	// high-water mark, or with no epoch for this run yet (NULL): the
	// caller then checks the epoch (epochNow). Args: resource, token,
	// high-water mark, token.
	q.FenceAdvanceChecked = MarkFence + ` INSERT INTO coord_fences (resource, fence, updated_at) SELECT ?, ?, UTC_TIMESTAMP(6) FROM (SELECT ` + epoch + ` AS b) e WHERE e.b >= ? AND e.b < ?
ON DUPLICATE KEY UPDATE
  updated_at = IF(fence <= VALUES(fence), VALUES(updated_at), updated_at),
  fence      = IF(fence <= VALUES(fence), VALUES(fence), fence)`
	// MySQL has no UPDATE … RETURNING: the caller reads max_id back in
	// the same transaction, under the row lock this UPDATE took. Args:
	// high-water mark, step, step, tag.
	q.SegmentAdvance = `UPDATE coord_id_segments s JOIN (SELECT ` + epoch + ` AS b) e ON e.b >= ?
SET s.max_id = GREATEST(s.max_id, e.b) + ?, s.step = ?, s.updated_at = UTC_TIMESTAMP(6) WHERE s.biz_tag = ?`
	q.SegmentRead = `SELECT max_id, COALESCE(` + epoch + `, 0) FROM coord_id_segments WHERE biz_tag = ?`
	// Args: job, fire, shard, total, status, owner, reason, high-water mark.
	q.JobClaim = `INSERT IGNORE INTO coord_job_runs (job, fire_time, shard, shard_total, status, owner, attempt, started_at, heartbeat_at, reason)
SELECT ?, ?, ?, ?, ?, ?, e.b + 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), NULLIF(?, '') FROM (SELECT ` + epoch + ` AS b) e WHERE e.b >= ?`
	// Args: high-water mark, owner, job, fire, shard, attempt, grace µs.
	q.JobTakeover = `UPDATE coord_job_runs r JOIN (SELECT ` + epoch + ` AS b) e ON e.b >= ?
SET r.attempt = GREATEST(r.attempt + 1, e.b + 1), r.owner = ?, r.status = 'running', r.started_at = UTC_TIMESTAMP(6),
  r.heartbeat_at = UTC_TIMESTAMP(6), r.finished_at = NULL
WHERE r.job = ? AND r.fire_time = ? AND r.shard = ? AND r.attempt = ?
  AND (r.status IN ('rerun', 'queued') OR (r.status = 'running' AND r.heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (r.status = 'retry' AND r.retry_at <= UTC_TIMESTAMP(6)))`
	// The attempt a claim or takeover just wrote. Args: job, fire, shard.
	q.JobAttempt = `SELECT attempt, COALESCE(` + epoch + `, 0) FROM coord_job_runs WHERE job = ? AND fire_time = ? AND shard = ?`
	q.JobFenceChecked = `SELECT attempt FROM coord_job_runs
WHERE job = ? AND fire_time = ? AND shard = ? AND attempt = ? AND status = 'running' AND ` + epoch + ` >= ? FOR UPDATE`
	q.JobFinishChecked = `UPDATE coord_job_runs SET status = ?, error = ?, finished_at = UTC_TIMESTAMP(6)
WHERE job = ? AND fire_time = ? AND shard = ? AND attempt = ? AND status = 'running' AND ` + epoch + ` >= ?`
	// Args: TTL + margin µs (three times). Columns: ready, epoch, µs left.
	q.WorkerEpochReady = `SELECT COALESCE(e.b = 0 OR (SELECT UTC_TIMESTAMP(6) >= f.first_seen + INTERVAL ? MICROSECOND FROM coord_forks f WHERE f.base = e.b), FALSE),
  e.b, COALESCE((SELECT GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), f.first_seen + INTERVAL ? MICROSECOND)) FROM coord_forks f WHERE f.base = e.b), ?)
FROM (SELECT ` + epoch + ` AS b) e`
}

// errStale is ErrStalePrimary for a server in epoch e, below hwm.
func errStale(e, hwm int64) error {
	return &Error{Kind: ErrStalePrimary, Err: fmt.Errorf("this server writes in failover epoch %d, older than epoch %d which this client saw (an old primary after a promotion, or a copy of the database restored over a newer one): point the client at the current primary, or after a restore run sqlcoord epoch advance", e, hwm)}
}

// epochNow reads the server's epoch on x. When its history is not the
// newest recorded (a promoted replica), it records a new epoch on x first
// (in x's transaction, if x is one) and reports retry: the statement that
// found it so must run again. A server below hwm is ErrStalePrimary.
func (o mysqlOps) epochNow(ctx context.Context, x Executor, hwm int64) (epoch int64, retry bool, err error) {
	var e sql.NullInt64
	if err := x.QueryRow(ctx, o.q.EpochRead).Scan(&e); err != nil {
		return 0, false, err
	}
	if !e.Valid {
		if o.q.EpochEnsure == "" {
			return 0, false, errors.New("sqlcoord: no failover epoch recorded")
		}
		// This run's id first: when another client recorded the run's
		// epoch meanwhile, it is read back and no second epoch starts.
		if _, err := x.Exec(ctx, o.q.EpochRun); err != nil {
			return 0, false, err
		}
		if err := x.QueryRow(ctx, o.q.EpochRead).Scan(&e); err != nil {
			return 0, false, err
		}
	}
	if !e.Valid {
		why := "a history this database had not recorded: a promoted replica"
		var known int
		if err := x.QueryRow(ctx, o.q.EpochKnown).Scan(&known); err != nil {
			return 0, false, err
		}
		if known > 0 {
			why = "the server restarted (a new run): a restart, a crash, or a data directory restored from a snapshot or backup, which can have lost what was issued since the copy"
		}
		if _, err := x.Exec(ctx, o.q.EpochEnsure, why); err != nil {
			return 0, false, err
		}
		if _, err := x.Exec(ctx, o.q.EpochLog); err != nil {
			return 0, false, err
		}
		if err := x.QueryRow(ctx, o.q.EpochRead).Scan(&e); err != nil {
			return 0, false, err
		}
		if !e.Valid {
			return 0, false, errors.New("sqlcoord: failover epoch not recorded")
		}
		retry = true
	}
	if e.Int64 < hwm {
		return e.Int64, false, errStale(e.Int64, hwm)
	}
	return e.Int64, retry, nil
}
