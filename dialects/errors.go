// Package dialects holds everything that differs between PostgreSQL and
// MySQL/MariaDB: the SQL text of every statement sqlcoord sends (one file per
// dialect: postgres.go, mysql.go), identifier quoting, and the classification
// of driver errors into the sentinel errors below, which every sqlcoord
// package shares and callers match with errors.Is.
package dialects

import (
	"errors"
	"fmt"
)

// Sentinel errors. A classified error matches exactly one of these with
// errors.Is and still unwraps to the driver's own error (*pgconn.PgError,
// *mysql.MySQLError, driver.ErrBadConn, ...).
var (
	// ErrLocked: the row or lock is held by another transaction and the
	// statement asked not to wait (FOR UPDATE NOWAIT).
	ErrLocked = errors.New("sqlcoord: locked by another transaction")
	// ErrLockTimeout: a bounded lock wait ran out (PostgreSQL lock_timeout,
	// MySQL/MariaDB innodb_lock_wait_timeout or FOR UPDATE WAIT n).
	ErrLockTimeout = errors.New("sqlcoord: lock wait timeout")
	// ErrLockIsolation: a lock asked for in a transaction whose snapshot
	// the lock statement itself would fix before the lock is granted
	// (PostgreSQL REPEATABLE READ and SERIALIZABLE): the transaction's
	// later reads could not see what the previous holder committed, so
	// the lock is refused instead. Nothing was locked; the transaction is
	// still usable. Run the locking transaction at READ COMMITTED.
	ErrLockIsolation = errors.New("sqlcoord: a lock cannot protect the reads of a REPEATABLE READ or SERIALIZABLE transaction on PostgreSQL (its snapshot is taken before the lock is granted); run the locking transaction at READ COMMITTED")
	// ErrStalePrimary: the server writes in a failover epoch older than
	// one this client has already seen on another server — an old primary
	// still running after a promotion (split brain), or a database
	// restored from a backup while the client remembers later history.
	// Nothing was written. Point the client at the current primary;
	// retrying on this server cannot help.
	ErrStalePrimary = errors.New("sqlcoord: stale primary: this server's history is older than one this client has seen")
	// ErrBadDSN: a DSN sqlcoord cannot use.
	ErrBadDSN = errors.New("sqlcoord: bad DSN")
	// ErrInvalidOptions: an Options field out of its range.
	ErrInvalidOptions = errors.New("sqlcoord: invalid options")
	// ErrUnreachable: the server cannot be reached or refuses the login.
	ErrUnreachable = errors.New("sqlcoord: cannot connect")
	// ErrDriverSetting: a wrapped pool's driver is configured in a way
	// sqlcoord cannot work with; the message names the setting.
	ErrDriverSetting = errors.New("sqlcoord: driver setting")
	// ErrNotATransaction: a helper that must run inside the caller's
	// transaction was given something else.
	ErrNotATransaction = errors.New("sqlcoord: not a transaction of this driver")
	// ErrDuplicate: a unique index rejected the row.
	ErrDuplicate = errors.New("sqlcoord: duplicate key")
	// ErrDeadlock: the server chose this transaction as a deadlock victim
	// and rolled it back. Retrying the whole transaction is safe.
	ErrDeadlock = errors.New("sqlcoord: deadlock detected")
	// ErrSerialization: a SERIALIZABLE/REPEATABLE READ conflict; retry the
	// whole transaction.
	ErrSerialization = errors.New("sqlcoord: serialization failure")
	// ErrCommitUnknown: the connection was lost while COMMIT was in flight,
	// so the transaction may or may not have committed. Never retry blindly.
	ErrCommitUnknown = errors.New("sqlcoord: commit outcome unknown")
	// ErrConnLost: the connection broke during a statement other than
	// COMMIT. The transaction (if any) is gone and was not committed.
	ErrConnLost = errors.New("sqlcoord: connection lost")
	// ErrNoSchema: a coord_ table does not exist in this database.
	ErrNoSchema = errors.New("sqlcoord: the schema is missing or older than this release (run `sqlcoord migrate up`)")
	// ErrDirty: a migration failed half-way; the schema needs a repair
	// by hand and `sqlcoord migrate force`.
	ErrDirty = errors.New("sqlcoord: schema is dirty")
	// ErrReadOnly: the server (a hot standby, a read-only replica) or the
	// transaction refuses writes. Not retryable on this server.
	ErrReadOnly = errors.New("sqlcoord: server is read-only")
	// ErrAccessDenied: authentication failed or the user lacks a privilege.
	ErrAccessDenied = errors.New("sqlcoord: access denied")
	// ErrNoSuchSession: a KILL named a session that had already ended.
	ErrNoSuchSession = errors.New("sqlcoord: no such session")
	// ErrQueryCanceled: the server canceled the statement (context
	// cancellation or statement timeout).
	ErrQueryCanceled = errors.New("sqlcoord: statement canceled")
	// ErrGaleraLocks: row locks (TryLock, Lock) on a MariaDB Galera node.
	// Galera takes SELECT … FOR UPDATE locks on the local node only, so
	// holders on two nodes would overlap; sqlcoord refuses instead. Use a
	// lease + fence (decided by certification), or send every lock user
	// to one node and say so (sqlcoord.Options.GaleraSingleWriter).
	ErrGaleraLocks = errors.New("sqlcoord: row locks are node-local on Galera (use a lease + fence, or one writer node with GaleraSingleWriter)")
	// ErrPreparedStatementLost: PostgreSQL answered 42P05 (prepared
	// statement already exists) or 26000 (does not exist): named prepared
	// statements through a transaction-mode pooler (PgBouncer) that lends
	// server connections to other clients. Set default_query_exec_mode=exec
	// in the DSN, Options.Pooler, or the CLI's --pooler / SQLCOORD_POOLER.
	ErrPreparedStatementLost = errors.New("sqlcoord: prepared statement lost (a transaction-mode pooler such as PgBouncer in between? set default_query_exec_mode=exec in the DSN, Options.Pooler, or sqlcoord --pooler)")
)

// Error is a driver error classified into one of the sentinel errors.
// errors.Is(err, Kind) and errors.As(err, &driverErr) both work.
type Error struct {
	Kind error  // one of the sentinel errors above
	Code string // SQLSTATE (PostgreSQL) or error number (MySQL), if any
	Err  error  // the driver's error
}

func (e *Error) Error() string {
	if e.Err == nil || e.Kind == ErrLocked {
		// a held lock is the whole story; the driver's text (MySQL: "Lock
		// wait timeout exceeded" for a wait of 0) only repeats it
		return e.Kind.Error()
	}
	if e.Code != "" {
		return fmt.Sprintf("%v (%s): %v", e.Kind, e.Code, e.Err)
	}
	return fmt.Sprintf("%v: %v", e.Kind, e.Err)
}

// Unwrap exposes both the sentinel and the driver error to errors.Is/As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Fatal reports whether err is a condition that retrying on the same
// server cannot fix: the schema is missing, the server is read-only or a
// stale primary, or access is denied. Long-running loops (schedulers, relays) stop on it.
func Fatal(err error) bool {
	return errors.Is(err, ErrNoSchema) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrStalePrimary)
}

// Retryable reports whether err is a failure after which running the whole
// transaction again is safe and may succeed: deadlock, serialization failure
// or lock wait timeout. ErrCommitUnknown is deliberately not retryable.
func Retryable(err error) bool {
	return errors.Is(err, ErrDeadlock) || errors.Is(err, ErrSerialization) || errors.Is(err, ErrLockTimeout)
}
