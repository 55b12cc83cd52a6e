package sqlcoord

import "github.com/sqlcoord/sqlcoord/dialects"

// The error vocabulary every sqlcoord package shares. A failure the
// database reports is returned as an *Error that matches exactly one of
// these with errors.Is and still unwraps to the driver's own error
// (*pgconn.PgError, *mysql.MySQLError, driver.ErrBadConn, ...), so
// errors.As works on both.
var (
	// ErrLocked: the lock or row is held by another transaction and the
	// call asked not to wait.
	ErrLocked = dialects.ErrLocked
	// ErrLockTimeout: a bounded lock wait ran out.
	ErrLockTimeout = dialects.ErrLockTimeout
	// ErrLockIsolation: a lock asked for in a transaction whose snapshot
	// the lock statement itself would fix before the lock is granted
	// (PostgreSQL REPEATABLE READ and SERIALIZABLE); nothing was locked
	// and the transaction is still usable. Lock at READ COMMITTED.
	ErrLockIsolation = dialects.ErrLockIsolation
	// ErrStalePrimary: the server writes in a failover epoch older than
	// one this client has already seen (split brain, or a restore);
	// nothing was written. See docs/failover.md.
	ErrStalePrimary = dialects.ErrStalePrimary
	// ErrDuplicate: a unique index rejected the row.
	ErrDuplicate = dialects.ErrDuplicate
	// ErrDeadlock: the server chose this transaction as a deadlock victim
	// and rolled it back; running the whole transaction again is safe.
	ErrDeadlock = dialects.ErrDeadlock
	// ErrSerialization: a serialization failure; run the whole
	// transaction again.
	ErrSerialization = dialects.ErrSerialization
	// ErrCommitUnknown: the connection was lost while COMMIT was in
	// flight: the transaction may or may not have committed. Never retry
	// blindly (txn.Do proves the outcome with a commit marker).
	ErrCommitUnknown = dialects.ErrCommitUnknown
	// ErrConnLost: the connection broke during a statement other than
	// COMMIT; the transaction, if any, did not commit.
	ErrConnLost = dialects.ErrConnLost
	// ErrNoSchema: a coord_ table does not exist (or the schema is older
	// than this sqlcoord): run `sqlcoord migrate up`.
	ErrNoSchema = dialects.ErrNoSchema
	// ErrReadOnly: the server (a hot standby, a read-only replica) or the
	// transaction refuses writes.
	ErrReadOnly = dialects.ErrReadOnly
	// ErrAccessDenied: authentication failed or a privilege is missing.
	ErrAccessDenied = dialects.ErrAccessDenied
	// ErrNoSuchSession: a KILL named a session that had already ended.
	ErrNoSuchSession = dialects.ErrNoSuchSession
	// ErrQueryCanceled: the server canceled the statement (context
	// cancellation or a statement timeout).
	ErrQueryCanceled = dialects.ErrQueryCanceled
	// ErrPreparedStatementLost: named prepared statements through a
	// transaction-mode pooler (PgBouncer): set the Pooler option or
	// default_query_exec_mode=exec in the DSN.
	ErrPreparedStatementLost = dialects.ErrPreparedStatementLost
	// ErrGaleraLocks: row locks on a multi-writer Galera cluster (or on a
	// node that is not the GaleraSingleWriter writer).
	ErrGaleraLocks = dialects.ErrGaleraLocks
	// ErrNotSynchronous: the server acknowledges commits before a standby
	// has them, and Options.RequireSyncReplication asked otherwise.
	ErrNotSynchronous = dialects.ErrNotSynchronous
	// ErrInvalidIdent: a table or column name that is not a plain
	// identifier.
	ErrInvalidIdent = dialects.ErrInvalidIdent
	// ErrBadDSN: a DSN sqlcoord cannot use (the message never shows its
	// password).
	ErrBadDSN = dialects.ErrBadDSN
	// ErrInvalidOptions: an Options field out of its range (Open and
	// every Wrap check them before anything else).
	ErrInvalidOptions = dialects.ErrInvalidOptions
	// ErrUnreachable: the server cannot be reached or refuses the login.
	ErrUnreachable = dialects.ErrUnreachable
	// ErrDriverSetting: a wrapped pool's driver is configured in a way
	// sqlcoord cannot work with; the message names the setting.
	ErrDriverSetting = dialects.ErrDriverSetting
	// ErrNotATransaction: a helper that must run inside the caller's
	// transaction was given something else (a pool, or another stack's
	// transaction).
	ErrNotATransaction = dialects.ErrNotATransaction
)

// Retryable reports whether err is a failure after which running the whole
// transaction again is safe and may succeed: a deadlock, a serialization
// failure or a lock wait timeout. ErrCommitUnknown is deliberately not.
func Retryable(err error) bool { return dialects.Retryable(err) }

// Fatal reports whether err is a condition that retrying on the same
// server cannot fix: the schema is missing, the server is read-only or a
// stale primary, or access is denied. Schedulers and relays stop on it.
func Fatal(err error) bool { return dialects.Fatal(err) }

// ServerInfo is what a server says about itself and its replication
// (Inspect).
type ServerInfo = dialects.ServerInfo
