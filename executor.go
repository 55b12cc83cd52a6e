package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
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
// their sqlx wrappers) to Executor. Statements run in the connection's
// default mode (for pgx, default_query_exec_mode).
func SQLExecutor(q Querier) Executor { return sqlExec{q: q} }

// poolExecutor is SQLExecutor for a pool's autocommit statements, which
// are run again when the server rolled them back as a deadlock victim.
func poolExecutor(q Querier, pre []any, d *dialects.Dialect) Executor {
	return sqlExec{q: q, pre: pre, auto: d}
}

// sqlExec runs statements through database/sql; pre is prepended to every
// statement's arguments (pgx's stdlib driver reads a leading
// pgx.QueryExecMode as the statement's mode; see poolerArgs).
type sqlExec struct {
	q   Querier
	pre []any
	// auto, set on a pool's executor (autocommit statements), runs again
	// a statement the server rolled back as a deadlock victim — on Galera
	// also a certification conflict with another node's commit (1213).
	// Such a statement changed nothing, so running it again is safe.
	auto *dialects.Dialect
}

func (e sqlExec) args(args []any) []any { return prepend(e.pre, args) }

// autocommitRetries bounds autocommit re-runs; autocommitBackoff spaces them.
const autocommitRetries = 10

var autocommitBackoff = backoff.Policy{Base: time.Millisecond, Max: 100 * time.Millisecond, Jitter: backoff.Full}

// rerun calls stmt until it succeeds, fails otherwise than by a deadlock,
// or the retries are used up; only for autocommit statements (d != nil).
func rerun(ctx context.Context, d *dialects.Dialect, stmt func() error) error {
	for i := 0; ; i++ {
		err := stmt()
		if err == nil || d == nil || i == autocommitRetries || !errors.Is(d.Classify(err), dialects.ErrDeadlock) {
			return err
		}
		if backoff.Sleep(ctx, autocommitBackoff.Delay(i)) != nil {
			return err
		}
	}
}

func prepend(pre, args []any) []any {
	if pre == nil {
		return args
	}
	return append(pre[:len(pre):len(pre)], args...)
}

func (e sqlExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	err := rerun(ctx, e.auto, func() (err error) {
		res, err = e.q.ExecContext(ctx, query, e.args(args)...)
		return err
	})
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (e sqlExec) QueryRow(ctx context.Context, query string, args ...any) Row {
	var row *sql.Row
	rerun(ctx, e.auto, func() error {
		row = e.q.QueryRowContext(ctx, query, e.args(args)...)
		return row.Err()
	})
	return row
}

func (e sqlExec) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	var rows *sql.Rows
	err := rerun(ctx, e.auto, func() (err error) {
		rows, err = e.q.QueryContext(ctx, query, e.args(args)...)
		return err
	})
	return rows, err
}

// PgxQuerier is what pgx's pool, connection and transaction have in
// common: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it.
type PgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PgxExecutor adapts a pgx pool, connection or transaction to Executor,
// with no database/sql in between. Statements run in the pool's
// default_query_exec_mode.
func PgxExecutor(q PgxQuerier) Executor { return pgxExec{q: q} }

// pgxExec runs statements through pgx; pre is prepended to every
// statement's arguments (see poolerArgs).
type pgxExec struct {
	q   PgxQuerier
	pre []any
}

// execMode makes pgx run one statement as an unnamed prepared statement.
var execMode = []any{pgx.QueryExecModeExec}

// poolerArgs is what the executors of a pool behind a transaction-mode
// pooler (Options.Pooler, WrapOptions.Pooler) prepend to sqlcoord's
// statements: pgx.QueryExecModeExec, so they never create named prepared
// statements (which the pooler hands to other clients) whatever the
// connection's default mode; nothing otherwise, or on other drivers. pgx's
// default (cached prepared statements) is about 1.4× faster on a
// lock-heavy transaction, which is why this is not always on.
func poolerArgs(db *sql.DB, pooler bool) []any {
	if !pooler {
		return nil
	}
	if db == nil { // pgx-native
		return execMode
	}
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return execMode
	}
	return nil
}

func (e pgxExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := e.q.Exec(ctx, query, prepend(e.pre, args)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e pgxExec) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgxRow{e.q.QueryRow(ctx, query, prepend(e.pre, args)...)}
}

func (e pgxExec) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := e.q.Query(ctx, query, prepend(e.pre, args)...)
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
