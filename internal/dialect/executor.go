package dialect

import "context"

// Executor runs statements on a pool, a connection or a transaction of any
// supported stack (see sqlcoord.Executor, its public name).
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
