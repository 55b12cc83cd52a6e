package dialects

// The global-transaction statements (package saga) per dialect. Times are
// the database's; durations are µs.

// SagaQueries are package saga's statements.
type SagaQueries struct {
	// Now is the database clock as an expression (for branch rows).
	Now string
	// Insert writes a global transaction. Args: gid, mode, branches,
	// timeout µs. InsertClaimed writes it claimed (attempt 1) for the
	// lease. Args: the same, claim token, owner, lease µs.
	Insert, InsertClaimed string
	// Claimed reads a transaction's status if the claim is still the
	// given one. Args: gid, claim token.
	Claimed string
	// BranchInsert starts a multi-row insert of branches; each row is
	// (gid, idx, branch, target, payload, Now).
	BranchInsert string
	// Claim (PostgreSQL) claims up to N due live transactions, oldest due
	// first, in one statement. Args: claim token, owner, lease µs, N.
	// Columns: gid, mode, status, step, branches, attempt, tries, µs left
	// before the deadline. ClaimGID claims the one named by the fourth
	// arg, if due. Both commit without waiting for the WAL flush (a lost
	// claim is harmless: see package saga).
	Claim, ClaimGID string
	// ClaimPick, ClaimSet, ClaimRead (MySQL family) are Claim in three
	// statements of one READ COMMITTED transaction: pick up to N due rows
	// (FOR UPDATE SKIP LOCKED; arg: N; column gid), set the claim (a
	// template whose %s is the gids' placeholders; args: claim token,
	// owner, lease µs, the gids), read them back (the same template; args:
	// the gids; Claim's columns). ClaimSetGID claims the one named, if
	// due, in one autocommit statement (args: claim token, owner, lease
	// µs, gid; 0 rows: not due or not there).
	ClaimPick, ClaimSetGID, ClaimSet, ClaimRead string
	// Branches reads a transaction's branches in order. Args: gid.
	// Columns: idx, branch, target, payload, status, tries, last error.
	Branches string
	// Record (and RecordRelaxed, committed without waiting for the WAL
	// flush where the dialect can) is a driver's fenced change of a
	// transaction and of one of its branches, in one autocommit statement;
	// see Dialect.SagaRecord for the arguments.
	Record, RecordRelaxed string
	// Get reads one transaction. Args: gid. Columns: gid, mode, status,
	// stuck, step, branches, attempt, owner, tries, reason, last error,
	// created_at, updated_at, seconds until due, seconds until deadline.
	Get string
	// List is Get's columns for up to N transactions, newest first: a
	// template whose %s is one of ListLive, ListStuck, ListEnded, ListAll.
	// Args: N.
	List                                    string
	ListLive, ListStuck, ListEnded, ListAll string
	// Retry makes a stuck transaction due again. Args: gid.
	Retry string
	// Resolve ends a stuck transaction as resolved. Args: reason, gid.
	Resolve string
	// Cleanup (PostgreSQL) deletes up to N ended transactions older than
	// an age, their branches by the foreign key's cascade. Args: age µs,
	// N. The MySQL family deletes the branches itself (a table copied with
	// CREATE TABLE … LIKE has no foreign key): CleanupPick lists up to N
	// such gids (args: age µs, N); CleanupBranches and CleanupGtx are
	// templates whose %s is the list of gid placeholders.
	Cleanup, CleanupPick, CleanupBranches, CleanupGtx string
	// Counts counts transactions by status and stuck. Columns: status,
	// stuck, count.
	Counts string
}

const sagaCols = `gid, mode, status, stuck, step, branches, attempt, COALESCE(owner, ''), tries, COALESCE(reason, ''), COALESCE(last_error, ''), created_at, updated_at`

// pgSagaClaim claims the oldest due live transactions (cond: the one
// named by $4; limit: how many).
func pgSagaClaim(cond, limit string) string {
	return `UPDATE coord_gtx g SET attempt = g.attempt + 1, claim = $1, owner = $2,
    due_at = clock_timestamp() + $3 * interval '1 microsecond', updated_at = clock_timestamp()
FROM (SELECT gid FROM coord_gtx
  WHERE status IN ('running', 'confirming', 'compensating') AND NOT stuck AND due_at <= clock_timestamp() ` + cond + `
  ORDER BY due_at LIMIT ` + limit + ` FOR UPDATE SKIP LOCKED) c
WHERE g.gid = c.gid AND set_config('synchronous_commit', 'off', true) IS NOT NULL
RETURNING g.gid, g.mode, g.status, g.step, g.branches, g.attempt, g.tries,
  (EXTRACT(EPOCH FROM g.deadline - clock_timestamp()) * 1000000)::bigint`
}

// pgSagaRecord is the fenced change of a transaction and of one of its
// branches: the branch changes only if the transaction's row did (its
// fence held). Args: status, step, tries, reason, last error, stuck, due
// µs, keep, gid, claim, idx (-1: none), branch status, tries, last error.
// Column: 1 when the fence held. relax: a condition that turns the
// commit's wait for the WAL flush off.
func pgSagaRecord(relax string) string {
	return `WITH g AS (UPDATE coord_gtx SET status = $1, step = $2, tries = $3,
    reason = CASE WHEN $4 = '' THEN reason ELSE right(COALESCE(reason || '; then ', '') || $4, 4000) END,
    last_error = NULLIF($5, ''), stuck = $6, due_at = clock_timestamp() + $7 * interval '1 microsecond',
    claim = CASE WHEN $8::boolean THEN claim END, updated_at = clock_timestamp()
  WHERE gid = $9 AND claim = $10` + relax + `
  RETURNING gid),
b AS (UPDATE coord_gtx_branches SET status = $12, tries = $13, last_error = NULLIF($14, ''), updated_at = clock_timestamp()
  FROM g WHERE coord_gtx_branches.gid = g.gid AND coord_gtx_branches.idx = $11)
SELECT count(*) FROM g`
}

const mysqlSagaRecord = `UPDATE coord_gtx g LEFT JOIN coord_gtx_branches b ON b.gid = g.gid AND b.idx = ?
SET g.status = ?, g.step = ?, g.tries = ?, g.reason = NULLIF(RIGHT(CONCAT_WS('; then ', g.reason, NULLIF(?, '')), 4000), ''),
    g.last_error = NULLIF(?, ''), g.stuck = ?, g.due_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    g.claim = IF(?, g.claim, NULL), g.updated_at = UTC_TIMESTAMP(6),
    b.status = ?, b.tries = ?, b.last_error = NULLIF(?, ''), b.updated_at = UTC_TIMESTAMP(6)
WHERE g.gid = ? AND g.claim = ?`

var pgSaga = SagaQueries{
	Now:    `clock_timestamp()`,
	Insert: `INSERT INTO coord_gtx (gid, mode, status, branches, deadline) VALUES ($1, $2, 'running', $3, clock_timestamp() + $4 * interval '1 microsecond')`,
	InsertClaimed: `INSERT INTO coord_gtx (gid, mode, status, branches, deadline, attempt, claim, owner, due_at)
VALUES ($1, $2, 'running', $3, clock_timestamp() + $4 * interval '1 microsecond', 1, $5, $6, clock_timestamp() + $7 * interval '1 microsecond')`,
	Claimed:       `SELECT status FROM coord_gtx WHERE gid = $1 AND claim = $2`,
	BranchInsert:  `INSERT INTO coord_gtx_branches (gid, idx, branch, target, payload, updated_at) VALUES `,
	Claim:         pgSagaClaim("", "$4"),
	ClaimGID:      pgSagaClaim("AND gid = $4 ", "1"),
	Branches:      `SELECT idx, branch, target, payload, status, tries, COALESCE(last_error, '') FROM coord_gtx_branches WHERE gid = $1 ORDER BY idx`,
	Record:        pgSagaRecord(``),
	RecordRelaxed: pgSagaRecord(` AND set_config('synchronous_commit', 'off', true) IS NOT NULL`),
	Get: `SELECT ` + sagaCols + `, EXTRACT(EPOCH FROM due_at - clock_timestamp())::float8, EXTRACT(EPOCH FROM deadline - clock_timestamp())::float8
FROM coord_gtx WHERE gid = $1`,
	List: `SELECT ` + sagaCols + `, EXTRACT(EPOCH FROM due_at - clock_timestamp())::float8, EXTRACT(EPOCH FROM deadline - clock_timestamp())::float8
FROM coord_gtx WHERE %s ORDER BY created_at DESC LIMIT $1`,
	ListLive:  `status IN ('running', 'confirming', 'compensating')`,
	ListStuck: `stuck`,
	ListEnded: `status IN ('succeeded', 'aborted', 'resolved')`,
	ListAll:   `true`,
	Retry: `UPDATE coord_gtx SET stuck = false, tries = 0, claim = NULL, due_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE gid = $1 AND stuck`,
	Resolve: `UPDATE coord_gtx SET status = 'resolved', stuck = false, claim = NULL,
    reason = right(COALESCE(reason || '; then ', '') || $1, 4000), updated_at = clock_timestamp()
WHERE gid = $2 AND stuck`,
	Cleanup: `DELETE FROM coord_gtx WHERE gid IN (SELECT gid FROM coord_gtx
  WHERE status IN ('succeeded', 'aborted', 'resolved') AND NOT stuck AND updated_at < clock_timestamp() - $1 * interval '1 microsecond'
  ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	Counts: `SELECT status, stuck, count(*) FROM coord_gtx GROUP BY status, stuck ORDER BY status, stuck`,
}

var mysqlSaga = SagaQueries{
	Now: `UTC_TIMESTAMP(6)`,
	Insert: `INSERT INTO coord_gtx (gid, mode, status, branches, due_at, deadline, created_at, updated_at)
VALUES (?, ?, 'running', ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	InsertClaimed: `INSERT INTO coord_gtx (gid, mode, status, branches, deadline, attempt, claim, owner, due_at, created_at, updated_at)
VALUES (?, ?, 'running', ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	Claimed:      `SELECT status FROM coord_gtx WHERE gid = ? AND claim = ?`,
	BranchInsert: `INSERT INTO coord_gtx_branches (gid, idx, branch, target, payload, updated_at) VALUES `,
	// No ORDER BY: the index (stuck, status, due_at) is read in its order
	// (compensations first, each state oldest due first) and the first
	// unlocked row is taken; sorting the three ranges would read and lock
	// every due row first.
	ClaimPick: `SELECT gid FROM coord_gtx FORCE INDEX (coord_gtx_due)
WHERE stuck = 0 AND status IN ('compensating', 'confirming', 'running') AND due_at <= UTC_TIMESTAMP(6)
LIMIT ? FOR UPDATE SKIP LOCKED`,
	ClaimSetGID: `UPDATE coord_gtx SET attempt = attempt + 1, claim = ?, owner = ?,
    due_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, updated_at = UTC_TIMESTAMP(6)
WHERE gid = ? AND stuck = 0 AND status IN ('compensating', 'confirming', 'running') AND due_at <= UTC_TIMESTAMP(6)`,
	ClaimSet: `UPDATE coord_gtx SET attempt = attempt + 1, claim = ?, owner = ?,
    due_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, updated_at = UTC_TIMESTAMP(6) WHERE gid IN (%s)`,
	ClaimRead: `SELECT gid, mode, status, step, branches, attempt, tries, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), deadline)
FROM coord_gtx WHERE gid IN (%s)`,
	Branches: `SELECT idx, branch, target, payload, status, tries, COALESCE(last_error, '') FROM coord_gtx_branches WHERE gid = ? ORDER BY idx`,
	// One multi-table UPDATE: the branch (LEFT JOIN: idx -1 names none)
	// changes only with its transaction's fenced row. Args: idx, status,
	// step, tries, reason, last error, stuck, due µs, keep, branch status,
	// tries, last error, gid, claim.
	Record: mysqlSagaRecord,
	// No per-transaction durability in the MySQL family
	// (innodb_flush_log_at_trx_commit is global).
	RecordRelaxed: mysqlSagaRecord,
	Get: `SELECT ` + sagaCols + `, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), due_at) / 1e6, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), deadline) / 1e6
FROM coord_gtx WHERE gid = ?`,
	List: `SELECT ` + sagaCols + `, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), due_at) / 1e6, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), deadline) / 1e6
FROM coord_gtx WHERE %s ORDER BY created_at DESC LIMIT ?`,
	ListLive:  `status IN ('running', 'confirming', 'compensating')`,
	ListStuck: `stuck = 1`,
	ListEnded: `status IN ('succeeded', 'aborted', 'resolved')`,
	ListAll:   `TRUE`,
	Retry: `UPDATE coord_gtx SET stuck = 0, tries = 0, claim = NULL, due_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
WHERE gid = ? AND stuck = 1`,
	Resolve: `UPDATE coord_gtx SET status = 'resolved', stuck = 0, claim = NULL,
    reason = RIGHT(CONCAT_WS('; then ', reason, ?), 4000), updated_at = UTC_TIMESTAMP(6)
WHERE gid = ? AND stuck = 1`,
	CleanupPick: `SELECT gid FROM coord_gtx WHERE status IN ('succeeded', 'aborted', 'resolved') AND stuck = 0
  AND updated_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT ?`,
	CleanupBranches: `DELETE FROM coord_gtx_branches WHERE gid IN (%s)`,
	CleanupGtx:      `DELETE FROM coord_gtx WHERE gid IN (%s) AND status IN ('succeeded', 'aborted', 'resolved') AND stuck = 0`,
	Counts:          `SELECT status, stuck, COUNT(*) FROM coord_gtx GROUP BY status, stuck ORDER BY status, stuck`,
}
