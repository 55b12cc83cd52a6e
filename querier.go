package sqlcoord

import (
	"context"
	"database/sql"
)

// Querier is what helpers that run inside the caller's transaction accept:
// *sql.Tx, *sql.Conn, *sql.DB, *sqlx.Tx and *sqlx.DB all satisfy it. Pass
// the transaction your business writes use, and the helper's guarantee
// commits or rolls back with them.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*sql.Conn)(nil)
	_ Querier = (*sql.DB)(nil)
)
