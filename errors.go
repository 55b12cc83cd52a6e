package sqlcoord

import "github.com/sqlcoord/sqlcoord/internal/dialect"

// The error vocabulary every sqlcoord package shares. A failure the
// database reports is returned as an *Error that matches exactly one of
// these with errors.Is and still unwraps to the driver's own error
// (*pgconn.PgError, *mysql.MySQLError, driver.ErrBadConn, ...), so
// errors.As works on both.
var (
	// ErrLocked: the lock or row is held by another transaction and the
	// call asked not to wait.
	ErrLocked = dialect.ErrLocked
	// ErrLockTimeout: a bounded lock wait ran out.
	ErrLockTimeout = dialect.ErrLockTimeout
	// ErrLockIsolation: a lock asked for in a transaction whose snapshot
	// the lock statement itself would fix before the lock is granted
	// (PostgreSQL REPEATABLE READ and SERIALIZABLE); nothing was locked
	// and the transaction is still usable. Lock at READ COMMITTED.
	ErrLockIsolation = dialect.ErrLockIsolation
	// ErrStalePrimary: the server writes in a failover epoch older than
	// one this client has already seen (split brain, or a restore);
	// nothing was written. See docs/failover.md.
	ErrStalePrimary = dialect.ErrStalePrimary
	// ErrDuplicate: a unique index rejected the row.
	ErrDuplicate = dialect.ErrDuplicate
	// ErrDeadlock: the server chose this transaction as a deadlock victim
	// and rolled it back; running the whole transaction again is safe.
	ErrDeadlock = dialect.ErrDeadlock
	// ErrSerialization: a serialization failure; run the whole
	// transaction again.
	ErrSerialization = dialect.ErrSerialization
	// ErrCommitUnknown: the connection was lost while COMMIT was in
	// flight: the transaction may or may not have committed. Never retry
	// blindly (txn.Do proves the outcome with a commit marker).
	ErrCommitUnknown = dialect.ErrCommitUnknown
	// ErrConnLost: the connection broke during a statement other than
	// COMMIT; the transaction, if any, did not commit.
	ErrConnLost = dialect.ErrConnLost
	// ErrNoSchema: a coord_ table does not exist (or the schema is older
	// than this sqlcoord): run `sqlcoord migrate up`.
	ErrNoSchema = dialect.ErrNoSchema
	// ErrReadOnly: the server (a hot standby, a read-only replica) or the
	// transaction refuses writes.
	ErrReadOnly = dialect.ErrReadOnly
	// ErrAccessDenied: authentication failed or a privilege is missing.
	ErrAccessDenied = dialect.ErrAccessDenied
	// ErrNoSuchSession: a KILL named a session that had already ended.
	ErrNoSuchSession = dialect.ErrNoSuchSession
	// ErrQueryCanceled: the server canceled the statement (context
	// cancellation or a statement timeout).
	ErrQueryCanceled = dialect.ErrQueryCanceled
	// ErrPreparedStatementLost: named prepared statements through a
	// transaction-mode pooler (PgBouncer): set the Pooler option or
	// default_query_exec_mode=exec in the DSN.
	ErrPreparedStatementLost = dialect.ErrPreparedStatementLost
	// ErrGaleraLocks: row locks on a multi-writer Galera cluster (or on a
	// node that is not the GaleraSingleWriter writer).
	ErrGaleraLocks = dialect.ErrGaleraLocks
	// ErrNotSynchronous: the server acknowledges commits before a standby
	// has them, and Options.RequireSyncReplication asked otherwise.
	ErrNotSynchronous = dialect.ErrNotSynchronous
	// ErrInvalidIdent: a table or column name that is not a plain
	// identifier.
	ErrInvalidIdent = dialect.ErrInvalidIdent
	// ErrBadDSN: a DSN sqlcoord cannot use (the message never shows its
	// password).
	ErrBadDSN = dialect.ErrBadDSN
	// ErrUnreachable: the server cannot be reached or refuses the login.
	ErrUnreachable = dialect.ErrUnreachable
	// ErrDriverSetting: a wrapped pool's driver is configured in a way
	// sqlcoord cannot work with; the message names the setting.
	ErrDriverSetting = dialect.ErrDriverSetting
	// ErrNotATransaction: a helper that must run inside the caller's
	// transaction was given something else (a pool, or another stack's
	// transaction).
	ErrNotATransaction = dialect.ErrNotATransaction
)

// Error is a database failure classified into one of the sentinel errors:
// Kind is the sentinel, Code the SQLSTATE (PostgreSQL) or error number
// (MySQL/MariaDB), Err the driver's error.
type Error = dialect.Error

// Retryable reports whether err is a failure after which running the whole
// transaction again is safe and may succeed: a deadlock, a serialization
// failure or a lock wait timeout. ErrCommitUnknown is deliberately not.
func Retryable(err error) bool { return dialect.Retryable(err) }

// Fatal reports whether err is a condition that retrying on the same
// server cannot fix: the schema is missing, the server is read-only or a
// stale primary, or access is denied. Schedulers and relays stop on it.
func Fatal(err error) bool { return dialect.Fatal(err) }

// ServerInfo is what a server says about itself and its replication
// (Inspect).
type ServerInfo = dialect.ServerInfo
