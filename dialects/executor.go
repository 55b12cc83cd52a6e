package dialects

import "context"

// Executor runs statements on a pool, a connection or a transaction of any
// supported stack (the root package's *DB, pgxv5 and sqlxdriver each have one).
type Executor interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query expected to return at most one row; Scan
	// returns sql.ErrNoRows when there is none.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Query runs a query returning rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Row is one result row.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set; Close it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// OwnedTx is a transaction sqlcoord itself began and commits (a lease
// acquire, a segment fetch, a relay batch): what a driver begins for sqlcoord itself (internal/core.Owned).
type OwnedTx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// IDExecutor is an Executor that reports the id a MySQL-family statement
// set (the auto-increment value of an INSERT, or LAST_INSERT_ID(expr) in
// an UPDATE) with its affected rows: one round trip where MySQL has no
// UPDATE … RETURNING. sqlcoord's database/sql executors implement it.
type IDExecutor interface {
	Executor
	ExecID(ctx context.Context, query string, args ...any) (affected, id int64, err error)
}
