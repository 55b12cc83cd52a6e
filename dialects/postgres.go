package dialects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgerrcode"
)

// Postgres is PostgreSQL (tested on 15), through pgx's database/sql driver.
// Every statement sqlcoord sends to PostgreSQL is in this file.
var Postgres = newPostgres()

// pgEpochBase is the failover epoch folded into every counter that must
// never go back — fencing tokens, segment ranges, job attempts, worker
// grants: the base recorded in coord_forks (migrations 16 and 20) for the
// history this server writes on: its (system identifier, WAL timeline), in
// this run of the server (pg_postmaster_start_time(): a restored disk
// snapshot is a new run, and so is a restart) and in this table (a dump
// restored into the cluster names another table oid). A history
// the database has not recorded — a promoted standby, a point-in-time
// recovery, a restore into another cluster — or one whose base is not the
// newest (a server promoted again after rejoining) starts a new epoch in
// the same statement (coord_epoch_advance), based on the clock, so a
// history that forks later gets a higher base than every earlier one, even
// one whose rows it never saw. On a fresh database it is 0: nothing
// changes until the first fork. 0 on a standby, where the write fails
// anyway (read-only, 25006). It is evaluated by the server that commits,
// in the statement that issues the value — never by the client.
const pgEpochBase = `(CASE WHEN pg_is_in_recovery() THEN 0 ELSE COALESCE((SELECT f.base FROM coord_forks f
    WHERE f.system_id = COALESCE(nullif(current_setting('sqlcoord.system_id', true), '')::bigint, coord_system_id())
      AND f.timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
      AND f.boot = pg_postmaster_start_time() AND f.rel = f.tableoid
      AND f.base = (SELECT max(base) FROM coord_forks)),
  coord_epoch_advance('a history this database had not recorded: promotion, recovery or restore')) END)`

// pgAsyncCommit, in the select list of an autocommit statement that
// changed a row, lets its transaction commit without waiting for the WAL
// flush (nor a synchronous standby): for writes whose loss in a crash
// only delays, never breaks, a guarantee — a lease's release (the next
// holder waits out the TTL). WAL is flushed in order, so any later
// durable commit (the next Acquire) makes the release durable too.
const pgAsyncCommit = `set_config('synchronous_commit', 'off', true)`

// pgEpochCTE is a WITH clause naming the epoch base e.b, checked against
// the client's high-water mark hwm (a parameter, e.g. "$4"): a client that
// has seen a newer epoch elsewhere gets SQLSTATE SC001 (ErrStalePrimary)
// from a server writing in an older one, before anything is written.
func pgEpochCTE(hwm string) string {
	return `WITH e AS (SELECT CASE WHEN x.b < ` + hwm + `::bigint AND NOT pg_is_in_recovery() THEN coord_stale_primary(x.b, ` + hwm + `::bigint) ELSE x.b END AS b
  FROM (SELECT ` + pgEpochBase + ` AS b) x)
`
}

// pgEpochCheck is a condition that is true unless the server writes in an
// epoch older than hwm, which raises SC001; for statements that issue no
// counter but must not run on a stale primary (fences, job completion).
func pgEpochCheck(hwm string) string {
	return pgEpochChecked(hwm) + ` IS NOT NULL`
}

// pgEpochChecked is the epoch base, raising SC001 when it is older than
// hwm.
func pgEpochChecked(hwm string) string {
	return `(SELECT CASE WHEN x.b < ` + hwm + `::bigint AND NOT pg_is_in_recovery() THEN coord_stale_primary(x.b, ` + hwm + `::bigint) ELSE x.b END FROM (SELECT ` + pgEpochBase + ` AS b) x)`
}

// pgTokenCheck is a condition that is true when the fencing token (a
// placeholder) was issued in the current epoch — above its base — and
// raises SC001 on a server in an epoch older than hwm. A token at or below
// the base was issued on a history that ended (before a promotion, a
// restart or a restore) and may have been issued again on this one.
func pgTokenCheck(token, hwm string) string {
	return pgEpochChecked(hwm) + ` < ` + token + `::bigint`
}

func newPostgres() *Dialect {
	d := &Dialect{
		name:       "postgres",
		family:     "postgres",
		driver:     "pgx",
		quote:      `"`,
		numbered:   true,
		classify:   classifyPostgres,
		tokenCheck: pgTokenCheck,
		epochBase:  pgEpochChecked,
		q: withCommitTS(pgQueries(&Queries{
			Console:  pgConsole,
			Saga:     pgSaga,
			Version:  `SELECT version()`,
			ReadOnly: `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'`,
			Now:      `SELECT clock_timestamp()`,
			// Starts a new failover epoch and returns its base (migration 16).
			EpochAdvance: `SELECT coord_epoch_advance('advance')`,
			// Every epoch the database has had, oldest first (coord_fork_log,
			// migration 26; a history only coord_forks has, from a release
			// before it). current: this server's
			// in this run, and the newest (false on a standby; false for
			// every history after a restart or restore, until the first
			// counter statement starts a new epoch).
			EpochList: `SELECT l.history, l.base, l.first_seen, l.reason,
  COALESCE(CASE WHEN pg_is_in_recovery() THEN false ELSE f.system_id = (SELECT system_identifier FROM pg_control_system())
    AND f.timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
    AND f.boot IS NOT DISTINCT FROM pg_postmaster_start_time() AND f.rel IS NOT DISTINCT FROM f.tableoid
    AND f.base = (SELECT max(base) FROM coord_forks) END, false)
FROM (SELECT history, base, first_seen, reason FROM coord_fork_log
  UNION ALL SELECT c.system_id::text || '/' || c.timeline::text, c.base, c.first_seen, c.reason FROM coord_forks c
    WHERE NOT EXISTS (SELECT 1 FROM coord_fork_log x WHERE x.base = c.base)) l
LEFT JOIN coord_forks f ON f.base = l.base
ORDER BY l.base`,
			IdleTxTimeoutSet: `SELECT set_config('idle_in_transaction_session_timeout', $1::text || 'ms', true)`,
		})),
	}
	d.ops = pgOps{q: d.q}
	d.parts = pgPartitions{d}
	d.keyParts = pgKeyParts{pgPartitions{d}}
	d.w = pgWaitSQL()
	return d
}

// pgQueries fills q, which holds the statements every part uses, with
// those of each part.
func pgQueries(q *Queries) *Queries {
	pgLocksQueries(q)
	pgLeasesQueries(q)
	pgTxnQueries(q)
	pgIdsQueries(q)
	pgJobsQueries(q)
	pgOutboxQueries(q)
	pgSessionsQueries(q)
	return q
}

// pgLocksQueries: row locks and their cleanup.
func pgLocksQueries(q *Queries) {
	// Locks (schema 15): a transaction-scoped advisory lock on the
	// name's 64-bit hash (pgLockKey), one statement, nothing written.
	// One column, in the order checked: 'ro' (a standby, or a
	// read-only transaction: a standby would grant an advisory lock
	// its primary knows nothing of), 'snap' (REPEATABLE READ /
	// SERIALIZABLE: the statement fixes the snapshot before the lock
	// is granted, so the lock could not protect later reads),
	// 'legacy' (an older protocol is on during a rolling upgrade:
	// migrations 14, 15; nothing locked), 'held' (another transaction
	// holds it), else locked: 'ok' (the name is registered for the
	// console) or 'new' (not yet). coord_lock_legacy() is a constant
	// the planner folds (migration 22). The …Known forms do not look
	// for the name's row (the caller saw it recently).
	q.LockAdvTry = pgLockStatement(`NOT pg_try_advisory_xact_lock(`+pgLockKey+`)`, true)
	q.LockAdvWait = pgLockStatement(`pg_advisory_xact_lock(`+pgLockKey+`)::text IS NULL`, true)
	q.LockAdvTryKnown = pgLockStatement(`NOT pg_try_advisory_xact_lock(`+pgLockKey+`)`, false)
	q.LockAdvWaitKnown = pgLockStatement(`pg_advisory_xact_lock(`+pgLockKey+`)::text IS NULL`, false)
	// The name's row for the console, after the lock was granted
	// (so no other transaction can be inserting it).
	q.LockRegister = `INSERT INTO coord_locks (name, lock_id) VALUES ($1, NULL) ON CONFLICT (name) DO NOTHING`
	q.LockHashTry = `SELECT pg_try_advisory_xact_lock(` + pgLockKey + `)`
	q.LockHashWait = `SELECT pg_advisory_xact_lock(` + pgLockKey + `)::text`
	// During a rolling upgrade (legacy): the row, its id and which
	// older locks to take besides the hash lock. A missing row gives
	// NULLs for name and id.
	q.LockLegacyRead = `SELECT l.name, l.lock_id, p.row_locks, p.id_locks FROM coord_lock_protocol p LEFT JOIN coord_locks l ON l.name = $1`
	// Run inside the caller's transaction, under a savepoint and a
	// lock_timeout (a concurrent creator must not make us wait long).
	q.LockCreate = `INSERT INTO coord_locks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING name`
	q.LockAssignID = `UPDATE coord_locks SET lock_id = nextval('coord_locks_lock_id_seq') WHERE name = $1 AND lock_id IS NULL`
	// SKIP LOCKED, not NOWAIT: an error would abort the caller's
	// transaction; an empty result leaves it usable.
	q.LockNowait = `SELECT name FROM coord_locks WHERE name = $1 FOR UPDATE SKIP LOCKED`
	q.LockWait = `SELECT name FROM coord_locks WHERE name = $1 FOR UPDATE`
	q.LockAdvTryID = `SELECT pg_try_advisory_xact_lock(` + pgLockSpace + `, $1::int)`
	q.LockAdvWaitID = `SELECT pg_advisory_xact_lock(` + pgLockSpace + `, $1::int)::text`
	q.LockProtocolGet = `SELECT row_locks, id_locks FROM coord_lock_protocol`
	q.LockProtocolSet = `UPDATE coord_lock_protocol SET row_locks = $1, id_locks = $2`
	// The transactions of other client sessions open now (their
	// virtual transaction ids: pg_locks is readable by every role),
	// and how many of a list are still open. A session reads the lock
	// protocol (coord_lock_legacy, migration 22) when a transaction
	// starts, so a switch holds for everyone once these have ended.
	q.LockProtocolOpen = `SELECT COALESCE(string_agg(l.virtualxid, ','), '') FROM pg_locks l
  WHERE l.locktype = 'virtualxid' AND l.pid <> pg_backend_pid() AND l.pid IN (SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = current_database())`
	q.LockProtocolStillOpen = `SELECT count(*) FROM pg_locks WHERE locktype = 'virtualxid' AND virtualxid = ANY(string_to_array($1, ','))`
	// Giving ids back to rows registered without one, before the id
	// protocol is switched on again.
	q.LockAssignIDs = `UPDATE coord_locks SET lock_id = nextval('coord_locks_lock_id_seq') WHERE lock_id IS NULL`
	// Rows of names not locked for a while; the hash lock needs none.
	q.LockCleanup = `DELETE FROM coord_locks WHERE name IN (SELECT name FROM coord_locks
  WHERE created_at < clock_timestamp() - $1 * interval '1 microsecond' ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	// set_config(..., true) is SET LOCAL: it ends with the transaction
	// even if LockWaitEnd never runs (the lock statement failed).
	q.LockWaitBegin = `SELECT current_setting('lock_timeout'), set_config('lock_timeout', $1::text || 'ms', true)`
	q.LockWaitEnd = `SELECT set_config('lock_timeout', $1, true)`
}

// pgLeasesQueries: leases, fences, elections and semaphores.
func pgLeasesQueries(q *Queries) {
	// One statement: the row lock taken by ON CONFLICT serialises
	// competing acquirers. The token grows whenever the previous
	// ownership ended (expired or released) or the owner changes; a
	// live lease re-acquired by its owner keeps its token — unless
	// it was granted in an earlier epoch (EXCLUDED.token is this
	// epoch's first token): then it grows past the epoch base.
	// Args: name, owner, ttl µs, high-water mark. Columns: token,
	// expires_at, epoch base; no row when held by another (a row is
	// always the caller's: its owner is not sent back). A lease that
	// is free goes only to the head of its queue ($5: the lease's
	// name, or a semaphore's queue) while the queue has a live
	// ticket (migration 25): a waiter that queued first is served
	// first, and nobody takes it past them. A grant also deletes
	// the caller's ticket $6 (0: none).
	q.LeaseAcquire = pgEpochCTE("$4") + `, a AS (INSERT INTO coord_leases AS l (name, owner, token, expires_at, acquired_at, renewed_at)
SELECT $1, $2, e.b + 1, clock_timestamp() + $3 * interval '1 microsecond', clock_timestamp(), clock_timestamp() FROM e
ON CONFLICT (name) DO UPDATE SET
  token       = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp() AND l.token >= EXCLUDED.token THEN l.token ELSE GREATEST(l.token + 1, EXCLUDED.token) END,
  acquired_at = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp() AND l.token >= EXCLUDED.token THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
  owner       = EXCLUDED.owner,
  expires_at  = EXCLUDED.expires_at,
  renewed_at  = EXCLUDED.renewed_at
WHERE (l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp())
  OR (l.expires_at <= clock_timestamp() AND COALESCE((` + pgHeadOwner("$5") + `), EXCLUDED.owner) = EXCLUDED.owner)
RETURNING token, expires_at),
t AS (DELETE FROM coord_tickets WHERE seq = $6 AND EXISTS (SELECT FROM a))
SELECT token, expires_at, (SELECT b FROM e) FROM a`
	// Columns: owner, token, expires_at, and whether the lease is
	// free (then a waiter queued before the caller heads its queue).
	q.LeaseRead = `SELECT owner, token, expires_at, expires_at <= clock_timestamp() FROM coord_leases WHERE name = $1`
	// A lease granted in an earlier epoch cannot be renewed: the
	// promoted server may have lost a later grant to someone else.
	// Args: ttl µs, name, owner, token, high-water mark.
	q.LeaseRenew = pgEpochCTE("$5") + `UPDATE coord_leases SET expires_at = clock_timestamp() + $1 * interval '1 microsecond', renewed_at = clock_timestamp()
FROM e WHERE name = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp() AND token > e.b
RETURNING expires_at, e.b`
	// LeaseRelease also wakes AcquireWait's listening waiter (the
	// NOTIFY is delivered at commit; autocommit here) — only when
	// one waits: the head of the lease's queue holds the queue's
	// lock (named by LeaseQueue, the fourth argument: the client
	// hashes the name, which cost the server more than the rest of
	// the statement), so a shared try fails. A NOTIFY takes a
	// database-wide lock at commit and serialised every Release
	// behind it. When the try succeeds it
	// holds the lock shared until this commit, so a waiter becoming
	// the head meanwhile queues behind the release and then finds
	// the lease free. During a rolling upgrade from row locks
	// (legacy protocol) the queue is a row: always notify —
	// coord_lock_legacy(), the protocol as a constant folded into
	// the plan (migration 22), as the lock statement reads it: no
	// table read per release.
	//
	// A release commits without waiting for its WAL flush
	// (pgAsyncCommit): losing it in a crash only makes the next
	// holder wait out the TTL. The legacy wake-up (the queue's
	// advisory lock, the lease's channel) serves waiters of a
	// release before migration 25 during a rolling upgrade.
	//
	// The row is locked FOR UPDATE first: a transaction admitted by
	// FenceLease holds it FOR KEY SHARE, so the release returns only
	// after those transactions ended (Reap ends them when they
	// stall), and none is admitted after it. The head of the queue
	// ($5), if one waits, is woken on its own channel, its ticket's
	// number as the payload (its Client tries that wait at once,
	// before reading the queues).
	q.LeaseRelease = MarkRevoke + ` WITH k AS (SELECT name FROM coord_leases WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp() FOR UPDATE)
UPDATE coord_leases l SET expires_at = clock_timestamp() FROM k
WHERE l.name = k.name AND l.owner = $2 AND l.token = $3 AND l.expires_at > clock_timestamp()
RETURNING CASE WHEN coord_lock_legacy() OR NOT pg_try_advisory_xact_lock_shared(hashtextextended($4::text, ` + pgLockSpace + `))
  THEN pg_notify('coord_lease_' || left(md5(l.name), 16), '') END,
  (SELECT pg_notify('coord_w_' || h.waiter, h.seq::text) FROM (` + pgHead("$5", "NULL") + `) h), ` + pgAsyncCommit
	q.LeaseGet = `SELECT owner, token, expires_at, clock_timestamp() FROM coord_leases WHERE name = $1`

	// A token at or below the epoch's base is refused like one below
	// the fence (no row written); a stale primary raises SC001.
	// Args: resource, token, high-water mark.
	q.FenceAdvanceChecked = MarkFence + ` INSERT INTO coord_fences AS f (resource, fence, updated_at) SELECT $1, $2, clock_timestamp() WHERE ` + pgTokenCheck("$2", "$3") + `
ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at
WHERE f.fence <= EXCLUDED.fence`
	q.FenceRead = `SELECT fence FROM coord_fences WHERE resource = $1 FOR UPDATE`
	q.ElectionTerm = `WITH t AS (INSERT INTO coord_election_terms AS t (name, term, leader, value, elected_at, updated_at)
SELECT $1, l.token, l.owner, $2, l.acquired_at, clock_timestamp() FROM coord_leases l
WHERE l.name = $3 AND l.owner = $4 AND l.token = $5 AND l.expires_at > clock_timestamp()
ON CONFLICT (name, term) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
WHERE t.leader = EXCLUDED.leader
RETURNING 1)
SELECT pg_notify('coord_election_' || left(md5($1), 16), ''),
  (SELECT count(pg_notify('coord_w_' || o.waiter, '')) FROM coord_observers o JOIN coord_waiters x ON x.id = o.waiter
   WHERE o.queue = $3 AND x.expires_at > clock_timestamp()) FROM t`
	q.ElectionLeader = `SELECT l.owner, l.token, l.acquired_at, l.expires_at, clock_timestamp(), t.value, t.updated_at
FROM coord_leases l LEFT JOIN coord_election_terms t ON t.name = $1 AND t.term = l.token WHERE l.name = $2`
	q.ElectionTerms = `SELECT term, leader, value, elected_at, updated_at FROM coord_election_terms
WHERE name = $1 AND term >= $2 ORDER BY term LIMIT $3`
	q.ElectionPrune = `DELETE FROM coord_election_terms WHERE name = $1 AND term < $2 AND elected_at < clock_timestamp() - interval '1 hour'`
	q.ElectionList = `SELECT DISTINCT ON (name) name, term, leader, value, elected_at FROM coord_election_terms
ORDER BY name, term DESC LIMIT $1`
	// As LeaseRelease; wakes the head of queue $5 and, with $6, the
	// queue's observers (an election's), and the legacy channels.
	q.LeaseReleaseNotify = MarkRevoke + ` WITH k AS (SELECT name FROM coord_leases WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp() FOR UPDATE),
  r AS (UPDATE coord_leases l SET expires_at = clock_timestamp() FROM k
    WHERE l.name = k.name AND l.owner = $2 AND l.token = $3 AND l.expires_at > clock_timestamp() RETURNING l.name)
SELECT pg_notify('coord_lease_' || left(md5(r.name), 16), ''), pg_notify($4, ''),
  (SELECT count(pg_notify('coord_w_' || s.w, s.p)) FROM (SELECT h.waiter AS w, h.seq::text AS p FROM (` + pgHead("$5", "NULL") + `) h
    UNION SELECT o.waiter, '' FROM coord_observers o JOIN coord_waiters x ON x.id = o.waiter WHERE $6 AND o.queue = $5 AND x.expires_at > clock_timestamp()) s)
FROM r`
	q.SemaphoreGet = `SELECT permits FROM coord_semaphores WHERE name = $1`
	q.SemaphoreInit = `INSERT INTO coord_semaphores (name, permits, updated_at) VALUES ($1, $2, clock_timestamp()) ON CONFLICT (name) DO NOTHING`
	q.SemaphoreSet = `INSERT INTO coord_semaphores (name, permits, updated_at) VALUES ($1, $2, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET permits = EXCLUDED.permits, updated_at = EXCLUDED.updated_at`
	// The range uses the primary key whatever the collation (names
	// that share the prefix and end in four digits sort by them);
	// the prefix and length checks keep exactly the permits.
	q.SemaphoreHolders = `SELECT name, owner, token, acquired_at, expires_at, clock_timestamp() FROM coord_leases
WHERE name BETWEEN $1 AND $2 AND starts_with(name, $3) AND length(name) = length($3) + 4 AND expires_at > clock_timestamp()
ORDER BY name`
	// FOR UPDATE first, as LeaseRelease: the revoked permits' fenced
	// transactions (FenceLease) end before it returns.
	q.SemaphoreRevoke = MarkRevoke + ` WITH k AS (SELECT name FROM coord_leases
  WHERE name BETWEEN $1 AND $2 AND starts_with(name, $3) AND length(name) = length($3) + 4 AND expires_at > clock_timestamp() FOR UPDATE)
UPDATE coord_leases l SET expires_at = clock_timestamp() FROM k WHERE l.name = k.name AND l.expires_at > clock_timestamp()`
	q.SemaphoreList = `SELECT name, permits, updated_at FROM coord_semaphores ORDER BY name LIMIT $1`
}

// pgTxnQueries: idempotency keys, barriers and commit markers.
// pgIdemClaim is the insert of a new idempotency key (done: with its
// response, Keys.Record; else pending, locked for $4 µs). The periods the
// key claims are decided in the statement, by the server's clock and
// coord_periods: period 0 alone when the table is not partitioned; the
// current period and the next one when it is (any two claims of one key
// less than a period apart then share a period, and the second one meets
// the first on the primary key), and 0 as well while the keys written
// before the table was partitioned are still protected. The rows go in
// ascending period order, and the later ones only when the first one was
// new: a key that exists is left alone, and two claimers of one key never
// hold rows the other waits for in the opposite order. The result: how
// many rows the key should have, how many went in, and which periods
// (the caller deletes them again when some but not all went in).
func pgIdemClaim(done bool) string {
	vals := `$1, $2, $3, 'pending', NULL::bytea, c.t + $4 * interval '1 microsecond', c.t, c.t`
	if done {
		vals = `$1, $2, $3, 'done', $4::bytea, c.t, c.t, c.t`
	}
	cols := `scope, idem_key, fingerprint, state, response, locked_until, created_at, updated_at, period`
	return `WITH c AS (
  SELECT n.t, floor(extract(epoch FROM n.t) * 1000000 / p.period_us)::bigint AS cur, p.legacy_until AS lu
  FROM (SELECT clock_timestamp() AS t) n LEFT JOIN coord_periods p ON p.tbl = 'coord_idempotency'
), v AS (
  SELECT r.period FROM c, LATERAL (VALUES (CASE WHEN c.cur IS NULL OR c.cur <= c.lu THEN 0::bigint END), (c.cur), (c.cur + 1)) r (period)
  WHERE r.period IS NOT NULL
), first AS (
  INSERT INTO coord_idempotency (` + cols + `)
  SELECT ` + vals + `, (SELECT min(period) FROM v) FROM c
  ON CONFLICT DO NOTHING RETURNING period
), rest AS (
  INSERT INTO coord_idempotency (` + cols + `)
  SELECT ` + vals + `, v.period FROM c, v, first f WHERE v.period > f.period ORDER BY v.period
  ON CONFLICT DO NOTHING RETURNING period
)
SELECT (SELECT count(*) FROM v)::int, ((SELECT count(*) FROM first) + (SELECT count(*) FROM rest))::int,
  COALESCE((SELECT string_agg(i.period::text, ',') FROM (SELECT period FROM first UNION ALL SELECT period FROM rest) i), '')`
}

func pgTxnQueries(q *Queries) {
	q.IdemInsert = pgIdemClaim(false)
	q.IdemInsertNowait = q.IdemInsert
	// the one row of a table not partitioned by period (nothing inserted
	// where it is: the claim above runs then)
	q.IdemInsertPlain = `INSERT INTO coord_idempotency (scope, idem_key, fingerprint, state, locked_until, created_at, updated_at)
SELECT $1, $2, $3, 'pending', clock_timestamp() + $4 * interval '1 microsecond', clock_timestamp(), clock_timestamp()
WHERE NOT EXISTS (SELECT 1 FROM coord_periods WHERE tbl = 'coord_idempotency') ON CONFLICT DO NOTHING`
	q.IdemInsertDonePlain = `INSERT INTO coord_idempotency (scope, idem_key, fingerprint, state, response, locked_until, created_at, updated_at)
SELECT $1, $2, $3, 'done', $4::bytea, clock_timestamp(), clock_timestamp(), clock_timestamp()
WHERE NOT EXISTS (SELECT 1 FROM coord_periods WHERE tbl = 'coord_idempotency') ON CONFLICT DO NOTHING`
	q.IdemRead = `SELECT fingerprint, state, response, locked_until > clock_timestamp() FROM coord_idempotency WHERE scope = $1 AND idem_key = $2
ORDER BY period DESC LIMIT 1`
	q.IdemInsertDone = pgIdemClaim(true)
	q.IdemUndo = `DELETE FROM coord_idempotency WHERE scope = $1 AND idem_key = $2 AND period = ANY (string_to_array($3, ',')::bigint[])`
	q.IdemTakeover = `UPDATE coord_idempotency SET locked_until = clock_timestamp() + $1 * interval '1 microsecond', fingerprint = $2, updated_at = clock_timestamp()
WHERE scope = $3 AND idem_key = $4 AND state = 'pending' AND locked_until <= clock_timestamp()`
	q.IdemComplete = `UPDATE coord_idempotency SET state = 'done', response = $1, updated_at = clock_timestamp()
WHERE scope = $2 AND idem_key = $3 AND state = 'pending'`
	q.IdemAbandon = `DELETE FROM coord_idempotency WHERE scope = $1 AND idem_key = $2 AND state = 'pending'`
	// SKIP LOCKED: cleanup never waits on (or blocks) live requests.
	q.IdemCleanup = `DELETE FROM coord_idempotency WHERE (scope, idem_key) IN (
  SELECT scope, idem_key FROM coord_idempotency
  WHERE state = 'done' AND created_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`

	q.BarrierInsert = `INSERT INTO coord_txn_barrier (gid, branch_id, op, reason, created_at) VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT DO NOTHING`
	q.BarrierCleanup = `DELETE FROM coord_txn_barrier WHERE (gid, branch_id, op) IN (
  SELECT gid, branch_id, op FROM coord_txn_barrier WHERE created_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`

	q.CommitMarkerInsert = `INSERT INTO coord_txn_commits (id, created_at) VALUES ($1, clock_timestamp())`
	q.CommitMarkerExists = `SELECT 1 FROM coord_txn_commits WHERE id = $1`
	q.CommitMarkerCleanup = `DELETE FROM coord_txn_commits WHERE id IN (
  SELECT id FROM coord_txn_commits WHERE created_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`
}

// pgIdsQueries: id segments and snowflake worker ids.
func pgIdsQueries(q *Queries) {
	q.SegmentCreate = `INSERT INTO coord_id_segments (biz_tag, max_id, step, updated_at) VALUES ($1, $2, $3, clock_timestamp())
ON CONFLICT (biz_tag) DO NOTHING`
	// Args: step, step, tag, high-water mark. Columns: max_id, epoch.
	q.SegmentAdvance = pgEpochCTE("$4") + `UPDATE coord_id_segments SET max_id = GREATEST(max_id, e.b) + $1, step = $2, updated_at = clock_timestamp()
FROM e WHERE biz_tag = $3 RETURNING max_id, e.b`
	q.SegmentRead = `SELECT max_id FROM coord_id_segments WHERE biz_tag = $1`

	q.WorkerFree = `SELECT worker_id, last_ms, released FROM coord_id_workers
WHERE released OR expires_at < clock_timestamp() - $1 * interval '1 microsecond'
ORDER BY worker_id LIMIT 1 FOR UPDATE SKIP LOCKED`
	q.WorkerMax = `SELECT MAX(worker_id) FROM coord_id_workers`
	// A new epoch recorded by this very statement is not visible
	// to it: the first call in a new epoch answers false. Args:
	// TTL + margin µs, high-water mark. Columns: ready, epoch,
	// µs left until ready.
	q.WorkerEpochReady = pgEpochCTE("$2") + `SELECT e.b = 0 OR COALESCE((SELECT clock_timestamp() >= f.first_seen + $1 * interval '1 microsecond'
  FROM coord_forks f WHERE f.base = e.b), false), e.b,
  COALESCE((SELECT GREATEST(0, EXTRACT(EPOCH FROM f.first_seen + $1 * interval '1 microsecond' - clock_timestamp()) * 1e6)::bigint
  FROM coord_forks f WHERE f.base = e.b), $1::bigint) FROM e`
	q.WorkerInsert = `INSERT INTO coord_id_workers (worker_id, owner, expires_at, last_ms, released, heartbeat_at)
VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond', 0, false, clock_timestamp())`
	q.WorkerTake = `UPDATE coord_id_workers SET owner = $1, expires_at = clock_timestamp() + $2 * interval '1 microsecond',
  released = false, heartbeat_at = clock_timestamp()
WHERE worker_id = $3 AND (released OR expires_at < clock_timestamp() - $4 * interval '1 microsecond')`
	q.WorkerHeartbeat = `UPDATE coord_id_workers SET expires_at = clock_timestamp() + $1 * interval '1 microsecond',
  last_ms = GREATEST(last_ms, $2), heartbeat_at = clock_timestamp()
WHERE worker_id = $3 AND owner = $4 AND NOT released AND expires_at > clock_timestamp()`
	q.WorkerRelease = `UPDATE coord_id_workers SET last_ms = GREATEST(last_ms, $1), released = true, expires_at = clock_timestamp()
WHERE worker_id = $2 AND owner = $3 AND NOT released AND expires_at > clock_timestamp()`
}

// pgJobsQueries: job runs.
func pgJobsQueries(q *Queries) {
	// Args: job, fire, shard, total, status, owner, high-water mark, reason.
	q.JobClaim = pgEpochCTE("$7") + `INSERT INTO coord_job_runs (job, fire_time, shard, shard_total, status, owner, attempt, started_at, heartbeat_at, reason)
SELECT $1, $2, $3, $4, $5, $6, e.b + 1, clock_timestamp(), clock_timestamp(), NULLIF($8::text, '') FROM e ON CONFLICT DO NOTHING
RETURNING attempt, (SELECT b FROM e)`
	q.JobHeartbeat = `UPDATE coord_job_runs SET heartbeat_at = clock_timestamp()
WHERE job = $1 AND fire_time = $2 AND shard = $3 AND attempt = $4 AND status = 'running'`
	q.JobFinish = `UPDATE coord_job_runs SET status = $1, error = $2, finished_at = clock_timestamp()
WHERE job = $3 AND fire_time = $4 AND shard = $5 AND attempt = $6 AND status = 'running'`
	// Args: error, permanent, max attempts, backoff µs, job, fire, shard, attempt.
	q.JobFail = `UPDATE coord_job_runs SET error = $1, finished_at = clock_timestamp(), failures = failures + 1,
  status = CASE WHEN $2::boolean OR failures + 1 >= $3::int THEN 'dead' ELSE 'retry' END,
  retry_at = CASE WHEN $2::boolean OR failures + 1 >= $3::int THEN NULL ELSE clock_timestamp() + $4::bigint * interval '1 microsecond' END,
  reason = CASE WHEN $2::boolean THEN 'permanent error (attempt ' || (failures + 1) || ')'
    WHEN failures + 1 >= $3::int THEN 'attempt ' || (failures + 1) || ' of ' || $3::int || ' failed' END
WHERE job = $5 AND fire_time = $6 AND shard = $7 AND attempt = $8 AND status = 'running'`
	q.JobOutcome = `SELECT status, failures, retry_at FROM coord_job_runs WHERE job = $1 AND fire_time = $2 AND shard = $3`
	q.JobFinishChecked = `UPDATE coord_job_runs SET status = $1, error = $2, finished_at = clock_timestamp()
WHERE job = $3 AND fire_time = $4 AND shard = $5 AND attempt = $6 AND status = 'running' AND ` + pgEpochCheck("$7")
	q.JobFence = `SELECT attempt FROM coord_job_runs
WHERE job = $1 AND fire_time = $2 AND shard = $3 AND attempt = $4 AND status = 'running' FOR UPDATE`
	// JobFence refusing a stale primary (args: …, high-water mark).
	q.JobFenceChecked = `SELECT attempt FROM coord_job_runs
WHERE job = $1 AND fire_time = $2 AND shard = $3 AND attempt = $4 AND status = 'running' AND ` + pgEpochCheck("$5") + ` FOR UPDATE`
	q.JobGet = `SELECT status, attempt FROM coord_job_runs WHERE job = $1 AND fire_time = $2 AND shard = $3`
	q.JobRegister = `INSERT INTO coord_jobs (name, schedule, tz, shards, updated_at) VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET schedule = EXCLUDED.schedule, tz = EXCLUDED.tz, shards = EXCLUDED.shards, updated_at = EXCLUDED.updated_at`
	q.JobDef = `SELECT schedule, tz, shards, updated_at FROM coord_jobs WHERE name = $1`
	q.JobNames = `SELECT name, schedule, tz, shards, updated_at FROM coord_jobs ORDER BY name`
	q.JobStale = `SELECT fire_time, shard, shard_total, attempt, status, failures FROM coord_job_runs r
WHERE job = $1 AND (status = 'rerun' OR (status = 'running' AND heartbeat_at < clock_timestamp() - $2 * interval '1 microsecond')
  OR (status = 'retry' AND retry_at <= clock_timestamp())
  OR (status = 'queued' AND NOT EXISTS (SELECT 1 FROM coord_job_runs p WHERE p.job = r.job AND p.fire_time < r.fire_time
    AND p.status IN ('running', 'retry', 'queued'))))
ORDER BY fire_time, shard LIMIT 100`
	// Args: owner, job, fire, shard, attempt, grace µs, high-water mark.
	q.JobTakeover = pgEpochCTE("$7") + `UPDATE coord_job_runs SET attempt = GREATEST(attempt + 1, e.b + 1), owner = $1, status = 'running', started_at = clock_timestamp(),
  heartbeat_at = clock_timestamp(), finished_at = NULL
FROM e WHERE job = $2 AND fire_time = $3 AND shard = $4 AND attempt = $5
  AND (status IN ('rerun', 'queued') OR (status = 'running' AND heartbeat_at < clock_timestamp() - $6 * interval '1 microsecond')
    OR (status = 'retry' AND retry_at <= clock_timestamp()))
RETURNING attempt, e.b`
	q.JobRerunMark = `UPDATE coord_job_runs SET status = 'rerun', failures = 0, retry_at = NULL, reason = 'rerun by hand' WHERE job = $1 AND fire_time = $2 AND status IN ('succeeded', 'failed', 'skipped', 'dead')`
	q.JobRerunInsert = `INSERT INTO coord_job_runs (job, fire_time, shard, shard_total, status, owner, attempt)
VALUES ($1, $2, $3, $4, 'rerun', '', 0) ON CONFLICT DO NOTHING`
	q.JobOverlap = `SELECT count(*) FROM coord_job_runs WHERE job = $1 AND fire_time < $2 AND status = 'running'
  AND heartbeat_at >= clock_timestamp() - $3 * interval '1 microsecond'`
	q.JobQueued = `SELECT count(*) FROM coord_job_runs WHERE job = $1 AND fire_time < $2 AND status IN ('running', 'retry', 'queued')`
	q.JobPartial = `SELECT fire_time, MAX(shard_total) FROM coord_job_runs
WHERE job = $1 AND fire_time > clock_timestamp() - interval '1 day' AND fire_time < clock_timestamp() - $2 * interval '1 microsecond'
GROUP BY fire_time HAVING count(*) < MAX(shard_total) ORDER BY fire_time LIMIT 100`
	q.JobLastFire = `SELECT MAX(fire_time) FROM coord_job_runs WHERE job = $1`
	q.JobCleanup = `DELETE FROM coord_job_runs WHERE (job, fire_time, shard) IN (
  SELECT job, fire_time, shard FROM coord_job_runs
  WHERE job = $1 AND fire_time < clock_timestamp() - $2 * interval '1 microsecond' AND status IN ('succeeded', 'failed', 'skipped', 'dead')
  ORDER BY fire_time LIMIT $3 FOR UPDATE SKIP LOCKED)`
	q.JobSlotCleanup = `DELETE FROM coord_job_slots WHERE (job, fire_time) IN (
  SELECT job, fire_time FROM coord_job_slots WHERE job = $1 AND fire_time < clock_timestamp() - $2 * interval '1 microsecond'
  ORDER BY fire_time LIMIT $3 FOR UPDATE SKIP LOCKED)`
	q.JobList = `SELECT fire_time, shard, shard_total, status, owner, attempt, started_at, heartbeat_at, finished_at, COALESCE(error, ''),
  failures, retry_at, COALESCE(reason, '')
FROM coord_job_runs WHERE job = $1 AND fire_time >= $2 AND fire_time < $3 ORDER BY fire_time, shard`

	q.JobSlotTotal = `INSERT INTO coord_job_slots (job, fire_time, shard_total, created_at)
SELECT $1, $2, GREATEST(count(*), 1), clock_timestamp() FROM coord_members
WHERE group_name = $3 AND expires_at > clock_timestamp()
ON CONFLICT (job, fire_time) DO NOTHING`
	q.JobSlotRead = `SELECT shard_total FROM coord_job_slots WHERE job = $1 AND fire_time = $2`
}

// pgOutboxQueries: the outbox and the inbox.
func pgOutboxQueries(q *Queries) {
	q.OutboxInsert = `INSERT INTO coord_outbox (topic, msg_key, payload, headers, available_at, msg_id)
VALUES ($1, $2, $3, $4, clock_timestamp() + $5 * interval '1 microsecond', $6)`
	q.OutboxInsertWake = `WITH ins AS (INSERT INTO coord_outbox (topic, msg_key, payload, headers, available_at, msg_id)
VALUES ($1, $2, $3, $4, clock_timestamp() + $5 * interval '1 microsecond', $6))
SELECT pg_notify('coord_outbox', '') WHERE NOT pg_try_advisory_xact_lock_shared(` + pgOutboxSleep + `)`
	q.OutboxIDInsert = `INSERT INTO coord_outbox_ids (msg_id) VALUES ($1::uuid)`
	q.OutboxIDCleanup = `DELETE FROM coord_outbox_ids WHERE msg_id IN (SELECT msg_id FROM coord_outbox_ids
  WHERE created_at < clock_timestamp() - $1 * interval '1 microsecond' ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	q.OutboxSleepSettings = `SELECT set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $2, true)`
	q.OutboxSleep = `SELECT pg_advisory_xact_lock(` + pgOutboxSleep + `)::text`
	q.OutboxStreamClaim = `SELECT id FROM coord_outbox WHERE id = ANY($1) AND state = 'pending' AND available_at <= clock_timestamp() ORDER BY id FOR UPDATE`
	q.OutboxStreamClaimMark = `WITH lease AS (SELECT EXISTS (SELECT 1 FROM coord_leases WHERE name = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp()) AS held),
marked AS (UPDATE coord_outbox SET state = 'published', published_at = clock_timestamp(), attempts = attempts + 1
  WHERE id = ANY($1) AND state = 'pending' AND available_at <= clock_timestamp() AND (SELECT held FROM lease)
    AND set_config('synchronous_commit', 'off', true) IS NOT NULL
  RETURNING id)
SELECT id FROM marked UNION ALL SELECT -1 FROM lease WHERE NOT held`
	q.OutboxStreamUnmark = `UPDATE coord_outbox SET state = 'pending', published_at = NULL, attempts = attempts - 1 WHERE id = ANY($1) AND state = 'published'`
	q.OutboxStreamDelete = `DELETE FROM coord_outbox
WHERE id = ANY($1) AND EXISTS (SELECT 1 FROM coord_leases WHERE name = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp())
  AND set_config('synchronous_commit', 'off', true) IS NOT NULL`
	q.OutboxStreamWake = `SELECT pg_logical_emit_message(false, 'sqlcoord.outbox', 'pending')`
	q.OutboxSlots = `SELECT slot_name, database, active, coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END, confirmed_flush_lsn), 0)::bigint,
  coalesce(wal_status, ''), coalesce(safe_wal_size, -1)
FROM pg_replication_slots WHERE slot_name LIKE 'sqlcoord\_%' AND database = current_database() ORDER BY slot_name`
	q.OutboxSleeper = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = ` + pgLockSpace + `::oid
  AND objid = (-1)::oid AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`
	q.OutboxClaim = `SELECT id, msg_id::text, topic, msg_key, payload, headers, created_at, attempts FROM coord_outbox
WHERE state = 'pending' AND available_at <= clock_timestamp()
ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`
	q.OutboxClaimOrdered = `SELECT id, msg_id::text, topic, msg_key, payload, headers, created_at, attempts FROM coord_outbox o
WHERE state = 'pending' AND available_at <= clock_timestamp()
  AND (msg_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM coord_outbox p WHERE p.msg_key = o.msg_key AND p.state = 'pending' AND p.id < o.id))
ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`
	// The marks are not flushed (synchronous_commit off for the
	// batch's transaction, set once in an InitPlan): one lost in a
	// crash or a failover republishes its messages, which
	// at-least-once allows; WAL order keeps the marks that survive a
	// prefix of those committed.
	q.OutboxPublishedBatch = `UPDATE coord_outbox SET state = 'published', published_at = clock_timestamp(), attempts = attempts + 1
WHERE id = ANY($1::bigint[]) AND (SELECT ` + pgAsyncCommit + `) IS NOT NULL`
	q.OutboxCommitTSOn = `SELECT current_setting('track_commit_timestamp') = 'on'`
	q.OutboxDeleteBatch = `DELETE FROM coord_outbox WHERE id = ANY($1::bigint[]) AND (SELECT ` + pgAsyncCommit + `) IS NOT NULL`
	q.OutboxFailed = `UPDATE coord_outbox SET attempts = attempts + 1, last_error = $1,
  available_at = clock_timestamp() + $2 * interval '1 microsecond',
  state = CASE WHEN attempts + 1 >= $3 THEN 'dead' ELSE 'pending' END
WHERE id = $4`
	q.OutboxDead = `UPDATE coord_outbox SET attempts = attempts + 1, last_error = $1, state = 'dead' WHERE id = $2`
	q.OutboxRequeue = `UPDATE coord_outbox SET state = 'pending', attempts = 0, available_at = clock_timestamp() WHERE state = 'dead' AND ($1 = 0 OR id = $2)`
	q.OutboxCancelLock = `SELECT state FROM coord_outbox WHERE msg_id = $1::uuid FOR UPDATE SKIP LOCKED`
	q.OutboxState = `SELECT state FROM coord_outbox WHERE msg_id = $1::uuid`
	q.OutboxCancel = `DELETE FROM coord_outbox WHERE msg_id = $1::uuid AND state = 'pending'`
	q.OutboxListDead = `SELECT id, msg_id::text, topic, COALESCE(msg_key, ''), attempts, COALESCE(last_error, ''), created_at FROM coord_outbox
WHERE state = 'dead' ORDER BY id LIMIT $1`
	q.OutboxStats = `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'published'),
  count(*) FILTER (WHERE state = 'dead'),
  COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - MIN(created_at) FILTER (WHERE state = 'pending')), 0)::float8,
  count(*) FILTER (WHERE state = 'pending' AND attempts > 0)
FROM coord_outbox`
	// The streaming relay's failed attempt at its head message, in
	// its batch transaction (the row is locked by it): the count and
	// the error, where operators look (Stats.Failing, the console).
	q.OutboxStreamFailed = `UPDATE coord_outbox SET attempts = $1, last_error = $2 WHERE id = $3 AND state = 'pending'`
	q.OutboxCleanup = `DELETE FROM coord_outbox WHERE id IN (
  SELECT id FROM coord_outbox WHERE state = 'published' AND published_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`
	q.InboxInsert = `INSERT INTO coord_inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	q.InboxCleanup = `DELETE FROM coord_inbox WHERE (consumer, message_id) IN (
  SELECT consumer, message_id FROM coord_inbox WHERE received_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`
}

// pgSessionsQueries: web sessions and membership.
func pgSessionsQueries(q *Queries) {
	// backend_start tells a reused pid apart from the session we saw.
	q.SessionID = `SELECT pg_backend_pid()::bigint, (extract(epoch FROM backend_start) * 1000000)::bigint
FROM pg_stat_activity WHERE pid = pg_backend_pid()`
	q.SessionEnd = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2`
	q.SessionAlive = `SELECT count(*) FROM pg_stat_activity
WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2`

	q.WebSessionInsert = `INSERT INTO coord_sessions (id_hash, user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp(), clock_timestamp(),
  LEAST(clock_timestamp() + $4 * interval '1 microsecond', clock_timestamp() + $5 * interval '1 microsecond'),
  clock_timestamp() + $6 * interval '1 microsecond')`
	q.WebSessionGet = `SELECT user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at, clock_timestamp()
FROM coord_sessions WHERE id_hash = $1 AND idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp()`
	q.WebSessionGetForUpdate = `SELECT user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at, clock_timestamp()
FROM coord_sessions WHERE id_hash = $1 AND idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp() FOR UPDATE`
	q.WebSessionTouch = `UPDATE coord_sessions SET last_seen_at = clock_timestamp(),
  idle_expires_at = LEAST(clock_timestamp() + $1 * interval '1 microsecond', abs_expires_at)
WHERE id_hash = $2 AND idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp()
  AND last_seen_at < clock_timestamp() - $3 * interval '1 microsecond'`
	q.WebSessionSave = `UPDATE coord_sessions SET data = $1, version = version + 1, last_seen_at = clock_timestamp(),
  idle_expires_at = LEAST(clock_timestamp() + $2 * interval '1 microsecond', abs_expires_at)
WHERE id_hash = $3 AND version = $4 AND idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp()`
	q.WebSessionCopy = `INSERT INTO coord_sessions (id_hash, user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp(), LEAST(clock_timestamp() + $6 * interval '1 microsecond', $7), $8)`
	q.WebSessionUpsert = `INSERT INTO coord_sessions AS s (id_hash, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at, user_id)
VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp(), LEAST(clock_timestamp() + $3 * interval '1 microsecond', $4), $5, $6)
ON CONFLICT (id_hash) DO UPDATE SET data = EXCLUDED.data, user_id = EXCLUDED.user_id, version = s.version + 1, last_seen_at = EXCLUDED.last_seen_at,
  idle_expires_at = EXCLUDED.idle_expires_at, abs_expires_at = EXCLUDED.abs_expires_at`
	q.WebSessionDelete = `DELETE FROM coord_sessions WHERE id_hash = $1`
	q.WebSessionDeleteUser = `DELETE FROM coord_sessions WHERE user_id = $1`
	q.WebSessionCleanup = `DELETE FROM coord_sessions WHERE id_hash IN (
  SELECT id_hash FROM coord_sessions
  WHERE LEAST(idle_expires_at, abs_expires_at) < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`
	q.WebSessionStats = `SELECT count(*) FILTER (WHERE idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp()),
  count(DISTINCT user_id) FILTER (WHERE idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp() AND user_id <> ''),
  count(*) FILTER (WHERE NOT (idle_expires_at > clock_timestamp() AND abs_expires_at > clock_timestamp()))
FROM coord_sessions`

	// Joins and leaves NOTIFY coord_members (payload: the group) in
	// the same statement, for Watch.
	q.MemberJoin = `WITH j AS (INSERT INTO coord_members AS m (group_name, member_id, meta, joined_at, heartbeat_at, expires_at)
VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp(), clock_timestamp() + $4 * interval '1 microsecond')
ON CONFLICT (group_name, member_id) DO UPDATE SET meta = EXCLUDED.meta, heartbeat_at = EXCLUDED.heartbeat_at,
  expires_at = EXCLUDED.expires_at,
  joined_at = CASE WHEN m.expires_at > clock_timestamp() THEN m.joined_at ELSE EXCLUDED.joined_at END)
SELECT pg_notify('coord_members', $1)`
	q.MemberHeartbeat = `UPDATE coord_members SET heartbeat_at = clock_timestamp(), expires_at = clock_timestamp() + $1 * interval '1 microsecond'
WHERE group_name = $2 AND member_id = $3 AND expires_at > clock_timestamp()`
	q.MemberLeave = `WITH l AS (DELETE FROM coord_members WHERE group_name = $1 AND member_id = $2)
SELECT pg_notify('coord_members', $1)`
	q.MemberList = `SELECT member_id, meta, joined_at, heartbeat_at, expires_at FROM coord_members
WHERE group_name = $1 AND expires_at > clock_timestamp() ORDER BY member_id`
	q.MemberCleanup = `DELETE FROM coord_members WHERE (group_name, member_id) IN (
  SELECT group_name, member_id FROM coord_members WHERE expires_at < clock_timestamp() - $1 * interval '1 microsecond'
  LIMIT $2 FOR UPDATE SKIP LOCKED)`
}

func classifyPostgres(err error) error {
	if err == nil {
		return nil
	}
	var pe sqlStater
	if errors.As(err, &pe) {
		kind := pgKind(pe.SQLState(), pe.Error())
		if kind == nil {
			return err
		}
		return &Error{Kind: kind, Code: pe.SQLState(), Err: err}
	}
	if strings.Contains(err.Error(), "read only connection") {
		// pgx's target_session_attrs=read-write found only standbys
		return &Error{Kind: ErrReadOnly, Err: err}
	}
	if isConnLost(err) {
		return &Error{Kind: ErrConnLost, Err: err}
	}
	return err
}

// pgKind classifies a SQLSTATE; msg is the error's text.
func pgKind(code, msg string) error {
	switch code {
	case pgerrcode.UniqueViolation:
		return ErrDuplicate
	case pgerrcode.LockNotAvailable: // NOWAIT, or lock_timeout expiry
		if strings.Contains(msg, "lock timeout") {
			return ErrLockTimeout
		}
		return ErrLocked
	case pgerrcode.DeadlockDetected:
		return ErrDeadlock
	case pgerrcode.SerializationFailure:
		return ErrSerialization
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedFunction, pgerrcode.UndefinedColumn:
		if strings.Contains(msg, "coord_") || strings.Contains(msg, "id_locks") {
			return ErrNoSchema // or a schema older than this sqlcoord
		}
	case pgStalePrimary:
		return ErrStalePrimary
	case pgerrcode.ReadOnlySQLTransaction: // hot standby, read-only transaction
		return ErrReadOnly
	case pgerrcode.InvalidAuthorizationSpecification, pgerrcode.InvalidPassword, pgerrcode.InsufficientPrivilege:
		return ErrAccessDenied
	case pgerrcode.InvalidCatalogName: // the database does not exist
		return ErrNoSchema
	case pgerrcode.QueryCanceled: // statement_timeout, cancel request
		return ErrQueryCanceled
	case pgerrcode.DuplicatePreparedStatement, pgerrcode.InvalidSQLStatementName:
		return ErrPreparedStatementLost
	case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow, pgerrcode.IdleInTransactionSessionTimeout:
		return ErrConnLost
	}
	if pgerrcode.IsConnectionException(code) {
		return ErrConnLost
	}
	return nil
}

// isConnLost reports transport-level failures shared by both drivers.
func isConnLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if hasType(err, "*pgconn.ConnectError") {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "connection reset")
}

// withCommitTS derives the claim statements that read a message's commit
// time (track_commit_timestamp on): the commit of the transaction that
// made the row pending (its xmin) for a first attempt, created_at
// otherwise (a failed attempt rewrote the row).
// OutboxListeners is the membership group (coord_members) of relays
// listening for NOTIFY coord_outbox. Enqueue notifies only while it has a
// live member: a NOTIFY serialises the commits of every notifying
// transaction (PostgreSQL's notification queue lock), which costs
// concurrent producers more than the notification is worth when no relay
// listens.
const OutboxListeners = "sqlcoord.outbox.listeners"

// pgOutboxSleep is the advisory lock a relay holds while it sleeps until
// a NOTIFY wakes it (OutboxSleep). Producers notify only when they cannot
// take it shared (OutboxInsertWake): a NOTIFY serialises the commits of
// every notifying transaction (PostgreSQL's notification queue lock, from
// the commit to its end), so producers do not notify while every relay is
// awake and polling. A producer that took it shared holds it until it
// commits, and a relay going to sleep waits for those (lock_timeout) and
// polls once more: a message committed without a NOTIFY is found by that
// poll. The second key, -1, is outside the positive lock ids of the
// legacy lock protocol.
const pgOutboxSleep = pgLockSpace + `, -1`

// pgLockSpace is the first key of sqlcoord's advisory locks: the
// two-integer form (objsubid 2 in pg_locks) with this constant ('sqlc')
// never meets an application's one-bigint advisory locks.
const pgLockSpace = "1936813155"

// pgStalePrimary is the SQLSTATE coord_stale_primary raises (migration 16).
const pgStalePrimary = "SC001"

// pgLockKey is the advisory key of the lock name $1 (schema 15): a 64-bit
// hash, seeded with pgLockSpace. A collision makes two names exclude each
// other, never lets two holders in.
const pgLockKey = `hashtextextended($1, ` + pgLockSpace + `)`

// pgLockStatement is the lock statement (see Queries.LockAdvTry): held
// is the condition that takes the lock and is true when another
// transaction holds it; probe looks for the name's coord_locks row.
func pgLockStatement(held string, probe bool) string {
	registered := "true"
	if probe {
		registered = "EXISTS (SELECT 1 FROM coord_locks WHERE name = $1)"
	}
	// A standby's transactions are all read-only (transaction_read_only
	// is on there), so one setting covers both.
	return `SELECT CASE WHEN current_setting('transaction_read_only') = 'on' THEN 'ro'
  WHEN current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN 'snap'
  WHEN coord_lock_legacy() THEN 'legacy'
  WHEN ` + held + ` THEN 'held'
  WHEN ` + registered + ` THEN 'ok' ELSE 'new' END`
}

func withCommitTS(q *Queries) *Queries {
	const from, to = "created_at, attempts FROM coord_outbox", "COALESCE(CASE WHEN attempts = 0 THEN pg_xact_commit_timestamp(xmin) END, created_at), attempts FROM coord_outbox"
	q.OutboxClaimCommitTS = strings.Replace(q.OutboxClaim, from, to, 1)
	q.OutboxClaimOrderedCommitTS = strings.Replace(q.OutboxClaimOrdered, from, to, 1)
	return q
}
