package dialects

// The web console's statements per dialect (see ConsoleQueries).

var pgConsole = ConsoleQueries{
	Now: `SELECT clock_timestamp()`,
	Leases: `SELECT name, owner, token, expires_at, acquired_at, renewed_at,
  EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8
FROM coord_leases ORDER BY expires_at > clock_timestamp() DESC, name LIMIT $1`,
	// Advisory locks are in pg_locks: on the name's hash (schema 15 on,
	// objsubid 1: the 64-bit key split into classid and objid, found
	// through the index on the hash; a held name whose row was cleaned up
	// shows as its key) and, during a rolling upgrade, on (pgLockSpace,
	// id). Row locks (the protocol before 14): a row locked FOR UPDATE
	// carries the locker's xid in xmax, a row inserted by a transaction
	// still open its xid in xmin; a transaction holds an ExclusiveLock on
	// its own xid while it is open.
	LocksHeld: `SELECT h.name, h.pid, COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'local'),
  COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start), 0)::float8, COALESCE(a.state, '')
FROM (
  SELECT COALESCE(c.name, '#' || k.key::text) AS name, k.pid FROM (
    SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS key, l.pid::bigint AS pid FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  ) k LEFT JOIN coord_locks c ON hashtextextended(c.name, ` + pgLockSpace + `) = k.key
  UNION
  SELECT c.name, l.pid::bigint FROM coord_locks c
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.classid = ` + pgLockSpace + `::oid AND l.objsubid = 2
    AND l.objid = c.lock_id::oid
  UNION
  SELECT c.name, l.pid::bigint FROM coord_locks c
  JOIN pg_locks l ON l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
    AND (l.transactionid = c.xmax OR l.transactionid = c.xmin)
) h JOIN pg_stat_activity a ON a.pid = h.pid
ORDER BY h.name LIMIT $1`,
	LockWaits: `SELECT a.pid::bigint, COALESCE(a.application_name, ''), array_to_string(pg_blocking_pids(a.pid), ','),
  COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - a.state_change), 0)::float8, left(COALESCE(a.query, ''), 300)
FROM pg_stat_activity a
WHERE a.wait_event_type = 'Lock' AND a.datname = current_database()
ORDER BY a.state_change LIMIT $1`,
	OutboxSeries: `SELECT floor(EXTRACT(EPOCH FROM clock_timestamp() - published_at) / 60)::int AS ago, count(*),
  COALESCE(max(EXTRACT(EPOCH FROM published_at - created_at)), 0)::float8
FROM coord_outbox WHERE state = 'published' AND published_at > clock_timestamp() - interval '1 hour'
GROUP BY 1 ORDER BY 1`,
	// keys, not rows: partitioned by period, a key is a row in each
	// period it claims
	KeyCounts: `SELECT count(DISTINCT (scope, idem_key)) FILTER (WHERE state = 'done'),
  count(DISTINCT (scope, idem_key)) FILTER (WHERE state = 'pending' AND locked_until >= clock_timestamp()),
  count(DISTINCT (scope, idem_key)) FILTER (WHERE state = 'pending' AND locked_until < clock_timestamp())
FROM coord_idempotency`,
	KeysPending: `SELECT DISTINCT ON (created_at, scope, idem_key) scope, idem_key, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8,
  EXTRACT(EPOCH FROM locked_until - clock_timestamp())::float8
FROM coord_idempotency WHERE state = 'pending' ORDER BY created_at, scope, idem_key LIMIT $1`,
	MemberGroups: `SELECT group_name, count(*) FILTER (WHERE expires_at > clock_timestamp()), count(*) FILTER (WHERE expires_at <= clock_timestamp())
FROM coord_members GROUP BY group_name ORDER BY group_name LIMIT $1`,
}

// MySQL 8: performance_schema.data_locks lists every granted record lock
// (not exercised here: the suite runs MariaDB).
var mysqlConsole = ConsoleQueries{
	Now: `SELECT UTC_TIMESTAMP(6)`,
	Leases: `SELECT name, owner, token, expires_at, acquired_at, renewed_at,
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6
FROM coord_leases ORDER BY expires_at > UTC_TIMESTAMP(6) DESC, name LIMIT ?`,
	LocksHeld: `SELECT l.LOCK_DATA, t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(p.HOST, ''),
  TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6, t.trx_state
FROM performance_schema.data_locks l
JOIN information_schema.INNODB_TRX t ON t.trx_id = l.ENGINE_TRANSACTION_ID
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE l.OBJECT_SCHEMA = DATABASE() AND l.OBJECT_NAME = 'coord_locks' AND l.LOCK_TYPE = 'RECORD'
  AND l.LOCK_STATUS = 'GRANTED' AND l.LOCK_MODE LIKE 'X%'
ORDER BY l.LOCK_DATA LIMIT ?`,
	LockTxns: `SELECT t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(p.HOST, ''),
  TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6, t.trx_rows_locked, t.trx_state
FROM information_schema.INNODB_TRX t
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_rows_locked > 0 AND (p.DB IS NULL OR p.DB = DATABASE())
ORDER BY t.trx_started LIMIT ?`,
	LockWaits: `SELECT t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(CAST(b.trx_mysql_thread_id AS CHAR), ''),
  TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1e6, LEFT(COALESCE(t.trx_query, ''), 300)
FROM information_schema.INNODB_TRX t
LEFT JOIN performance_schema.data_lock_waits w ON w.REQUESTING_ENGINE_TRANSACTION_ID = t.trx_id
LEFT JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_state = 'LOCK WAIT' ORDER BY t.trx_wait_started LIMIT ?`,
	OutboxSeries: `SELECT FLOOR(TIMESTAMPDIFF(SECOND, published_at, UTC_TIMESTAMP(6)) / 60) AS ago, COUNT(*),
  COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, created_at, published_at)) / 1e6, 0)
FROM coord_outbox WHERE state = 'published' AND published_at > UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
GROUP BY 1 ORDER BY 1`,
	// keys, not rows (see PostgreSQL's); scope and key hold no NUL
	KeyCounts: `SELECT COUNT(DISTINCT CASE WHEN state = 'done' THEN CONCAT(scope, CHAR(0), idem_key) END),
  COUNT(DISTINCT CASE WHEN state = 'pending' AND locked_until >= UTC_TIMESTAMP(6) THEN CONCAT(scope, CHAR(0), idem_key) END),
  COUNT(DISTINCT CASE WHEN state = 'pending' AND locked_until < UTC_TIMESTAMP(6) THEN CONCAT(scope, CHAR(0), idem_key) END)
FROM coord_idempotency`,
	KeysPending: `SELECT scope, idem_key, MAX(TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6))) / 1e6,
  MAX(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), locked_until)) / 1e6
FROM coord_idempotency WHERE state = 'pending' GROUP BY scope, idem_key ORDER BY MIN(created_at) LIMIT ?`,
	MemberGroups: `SELECT group_name, COALESCE(SUM(expires_at > UTC_TIMESTAMP(6)), 0), COALESCE(SUM(expires_at <= UTC_TIMESTAMP(6)), 0)
FROM coord_members GROUP BY group_name ORDER BY group_name LIMIT ?`,
}

// MariaDB has no performance_schema.data_locks: information_schema's
// INNODB_LOCKS / INNODB_LOCK_WAITS list locks that someone waits for.
const mariaDBLocksHeld = `SELECT l.lock_data, t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(p.HOST, ''),
  TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6, t.trx_state
FROM information_schema.INNODB_LOCKS l
JOIN information_schema.INNODB_TRX t ON t.trx_id = l.lock_trx_id
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE l.lock_table = CONCAT('` + "`" + `', DATABASE(), '` + "`" + `.` + "`" + `coord_locks` + "`" + `')
  AND l.lock_type = 'RECORD' AND l.lock_mode = 'X' AND t.trx_state <> 'LOCK WAIT'
ORDER BY l.lock_data LIMIT ?`

const mariaDBLockWaits = `SELECT t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(CAST(b.trx_mysql_thread_id AS CHAR), ''),
  TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1e6, LEFT(COALESCE(t.trx_query, ''), 300)
FROM information_schema.INNODB_TRX t
LEFT JOIN information_schema.INNODB_LOCK_WAITS w ON w.requesting_trx_id = t.trx_id
LEFT JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_state = 'LOCK WAIT' ORDER BY t.trx_wait_started LIMIT ?`
