package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
)

// Querier is what database/sql pools, connections and transactions (and
// their sqlx wrappers) have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQLExec runs sqlcoord's statements through database/sql; Pre is
// prepended to every statement's arguments (pgx's stdlib driver reads a
// leading pgx.QueryExecMode as the statement's mode: see PgxExecMode).
type SQLExec struct {
	Q   Querier
	Pre []any
	// Auto, set on a pool's executor (autocommit statements), runs again
	// a statement the server rolled back as a deadlock victim — on Galera
	// also a certification conflict with another node's commit (1213).
	// Such a statement changed nothing, so running it again is safe.
	Auto *dialects.Dialect
}

// PoolExecutor is SQLExec for a pool's autocommit statements.
func PoolExecutor(q Querier, pre []any, d *dialects.Dialect) dialects.Executor {
	return SQLExec{Q: q, Pre: pre, Auto: d}
}

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

// Prepend returns pre followed by args (args itself when pre is nil).
func Prepend(pre, args []any) []any {
	if pre == nil {
		return args
	}
	return append(pre[:len(pre):len(pre)], args...)
}

func (e SQLExec) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	err := rerun(ctx, e.Auto, func() (err error) {
		res, err = e.Q.ExecContext(ctx, query, Prepend(e.Pre, args)...)
		return err
	})
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ExecID is Exec that also returns the id the statement reported
// (dialects.IDExecutor): MySQL's last insert id, or the value of
// LAST_INSERT_ID(expr) evaluated by an UPDATE.
func (e SQLExec) ExecID(ctx context.Context, query string, args ...any) (int64, int64, error) {
	var res sql.Result
	err := rerun(ctx, e.Auto, func() (err error) {
		res, err = e.Q.ExecContext(ctx, query, Prepend(e.Pre, args)...)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, err
	}
	id, err := res.LastInsertId()
	return n, id, err
}

func (e SQLExec) QueryRow(ctx context.Context, query string, args ...any) dialects.Row {
	var row *sql.Row
	rerun(ctx, e.Auto, func() error {
		row = e.Q.QueryRowContext(ctx, query, Prepend(e.Pre, args)...)
		return row.Err()
	})
	return row
}

func (e SQLExec) Query(ctx context.Context, query string, args ...any) (dialects.Rows, error) {
	var rows *sql.Rows
	err := rerun(ctx, e.Auto, func() (err error) {
		rows, err = e.Q.QueryContext(ctx, query, Prepend(e.Pre, args)...)
		return err
	})
	return rows, err
}

// SQLOwned is a database/sql transaction sqlcoord began and commits.
type SQLOwned struct {
	SQLExec
	Tx *sql.Tx
}

func (t SQLOwned) Commit(context.Context) error   { return t.Tx.Commit() }
func (t SQLOwned) Rollback(context.Context) error { return t.Tx.Rollback() }

// BeginOwned starts a transaction on db that sqlcoord commits itself.
// On an error the transaction is a nil interface, as pgxv5's is (a
// non-nil OwnedTx holding no *sql.Tx would panic on Rollback).
func BeginOwned(ctx context.Context, db *sql.DB, opts *sql.TxOptions, pre []any) (dialects.OwnedTx, error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return SQLOwned{SQLExec{Q: tx, Pre: pre}, tx}, nil
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// NotifyVia sends a NOTIFY through e (a pool: another connection than the
// listening one); for the probe of a Listener.
func NotifyVia(e dialects.Executor) func(ctx context.Context, channel, payload string) error {
	return func(ctx context.Context, channel, payload string) error {
		_, err := e.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		return err
	}
}
