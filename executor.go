package sqlcoord

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlcoord/sqlcoord/dialects"
)

// Executor runs sqlcoord's statements on a pool, a connection or a
// transaction, whatever the application's stack: database/sql, sqlx or
// pgx. Drivers hand them out (Driver.Executor, Driver.TxExecutor); the
// helpers never see a stack's own types. Row.Scan returns sql.ErrNoRows
// when there is no row, on every stack.
type Executor = dialects.Executor

// Row is one result row.
type Row = dialects.Row

// Rows is a result set; Close it.
type Rows = dialects.Rows

// SQLExecutor adapts a database/sql pool, connection or transaction (or
// their sqlx wrappers) to Executor. Statements run in the driver's default
// mode; the drivers (DB, SQLX) hand out executors that, on pgx's stdlib
// driver, run them in pgx.QueryExecModeExec (see Driver).
func SQLExecutor(q Querier) Executor { return sqlExec{q: q} }

// sqlExec runs statements through database/sql; pre is prepended to every
// statement's arguments (pgx's stdlib driver reads a leading
// pgx.QueryExecMode as the statement's mode).
type sqlExec struct {
	q   Querier
	pre []any
}

func (e sqlExec) args(args []any) []any {
	if e.pre == nil {
		return args
	}
	return append(e.pre[:len(e.pre):len(e.pre)], args...)
}

func (e sqlExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := e.q.ExecContext(ctx, query, e.args(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (e sqlExec) QueryRow(ctx context.Context, query string, args ...any) Row {
	return e.q.QueryRowContext(ctx, query, e.args(args)...)
}

func (e sqlExec) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return e.q.QueryContext(ctx, query, e.args(args)...)
}

// PgxQuerier is what pgx's pool, connection and transaction have in
// common: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it.
type PgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PgxExecutor adapts a pgx pool, connection or transaction to Executor,
// with no database/sql in between. Statements run in
// pgx.QueryExecModeExec: one round trip, no named prepared statements, so
// they work behind PgBouncer in transaction mode whatever the pool's
// default mode is.
func PgxExecutor(q PgxQuerier) Executor { return pgxExec{q} }

type pgxExec struct{ q PgxQuerier }

func withMode(args []any) []any {
	return append([]any{pgx.QueryExecModeExec}, args...)
}

// sqlModeArgs is what sqlExec prepends for a database/sql pool: on pgx's
// stdlib driver, pgx.QueryExecModeExec, so sqlcoord's statements never
// create named prepared statements (which a transaction-mode pooler such
// as PgBouncer hands to other clients) whatever default_query_exec_mode
// the application's DSN chose; nothing for other drivers.
func sqlModeArgs(db *sql.DB) []any {
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return []any{pgx.QueryExecModeExec}
	}
	return nil
}

func (e pgxExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := e.q.Exec(ctx, query, withMode(args)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e pgxExec) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgxRow{e.q.QueryRow(ctx, query, withMode(args)...)}
}

func (e pgxExec) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := e.q.Query(ctx, query, withMode(args)...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

type pgxRow struct{ r pgx.Row }

func (r pgxRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, sql.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

type pgxRows struct{ r pgx.Rows }

func (r pgxRows) Next() bool             { return r.r.Next() }
func (r pgxRows) Scan(dest ...any) error { return r.r.Scan(dest...) }
func (r pgxRows) Err() error             { return r.r.Err() }
func (r pgxRows) Close() error           { r.r.Close(); return r.r.Err() }
