package pgxv5

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// Querier is what pgx's pool, connection and transaction have in common:
// *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Executor adapts a pgx pool, connection or transaction to
// dialects.Executor; Pre is prepended to every statement's arguments
// (pgx.QueryExecModeExec with Options.Pooler).
type Executor struct {
	Q   Querier
	Pre []any
}

// execMode makes pgx run one statement as an unnamed prepared statement.
var execMode = []any{pgx.QueryExecModeExec}

func init() {
	// A database/sql pool on pgx's stdlib driver (sqlcoord.Open,
	// sqlcoord.WrapDB) gets the Pooler option and LISTEN from here.
	core.PgxExecMode = pgx.QueryExecModeExec
	core.PgxStdlibListen = stdlibListen
	core.PgxParseConfig = func(dsn string) error {
		_, err := pgx.ParseConfig(dsn)
		return err
	}
}

func (e Executor) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := e.Q.Exec(ctx, query, core.Prepend(e.Pre, args)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e Executor) QueryRow(ctx context.Context, query string, args ...any) dialects.Row {
	return row{e.Q.QueryRow(ctx, query, core.Prepend(e.Pre, args)...)}
}

func (e Executor) Query(ctx context.Context, query string, args ...any) (dialects.Rows, error) {
	r, err := e.Q.Query(ctx, query, core.Prepend(e.Pre, args)...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, sql.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

type rows struct{ r pgx.Rows }

func (r rows) Next() bool             { return r.r.Next() }
func (r rows) Scan(dest ...any) error { return r.r.Scan(dest...) }
func (r rows) Err() error             { return r.r.Err() }
func (r rows) Close() error           { r.r.Close(); return r.r.Err() }

// redactErr returns err's text with every secret of dsn removed.
func redactErr(err error, dsn string) string { return redact.Text(err.Error(), dsn) }
