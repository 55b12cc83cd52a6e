// Package sqlxdriver is sqlcoord's sqlx stack: an application's own
// *sqlx.DB as a sqlcoord.Driver[*sqlx.Tx], so helpers take the
// application's *sqlx.Tx and txn.Do hands one to its callback (with the
// driver name kept, so NamedExec and Rebind work).
package sqlxdriver

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// Driver is an application's *sqlx.DB as a sqlcoord.Driver[*sqlx.Tx].
type Driver struct {
	X       *sqlx.DB
	dialect *dialects.Dialect
	pre     []any
	epochs  *sqlcoord.Epochs
	tracer  trace.Tracer
	metrics metrics.Recorder
	pace    sqlcoord.CleanupPace // Options.CleanupDuty, Options.CleanupRate
	db      *sqlcoord.DB         // the same pool as the database/sql stack, for LISTEN
	sealed                       // owned transactions, executors of any transaction
}

// sealed is embedded by every driver of the module (see core.Plumbing).
type sealed = core.Plumbing

var (
	_ sqlcoord.Driver[*sqlx.Tx] = (*Driver)(nil)
	_ sqlcoord.Listener         = (*Driver)(nil)
)

// Wrap uses an application's own *sqlx.DB after the connection check
// every sqlcoord Open and Wrap runs (see sqlcoord.WrapDB for what it
// needs of a MySQL driver). sqlcoord never closes it.
func Wrap(ctx context.Context, x *sqlx.DB, opts ...sqlcoord.Options) (*Driver, error) {
	db, err := sqlcoord.WrapDB(ctx, x.DB, opts...)
	if err != nil {
		return nil, err
	}
	var o sqlcoord.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	d := &Driver{X: x, dialect: db.Dialect(), pre: preOf(db), epochs: db.Epochs(),
		tracer: core.Tracer(o.TracerProvider), metrics: o.Metrics, pace: db.CleanupPace(), db: db}
	d.sealed = core.NewPlumbing(core.Stack{Begin: d.beginOwned, SQLDB: func() *sql.DB { return x.DB },
		OwnConn: func(ctx context.Context) (dialects.Executor, func() error, error) { return core.OwnConn(ctx, db) }})
	return d, nil
}

// preOf is the statement-mode arguments the database/sql stack chose.
func preOf(db *sqlcoord.DB) []any {
	if e, ok := db.Executor().(core.SQLExec); ok {
		return e.Pre
	}
	return nil
}

func (s *Driver) Dialect() *dialects.Dialect                      { return s.dialect }
func (s *Driver) Epochs() *sqlcoord.Epochs                        { return s.epochs }
func (s *Driver) Tracer() trace.Tracer                            { return s.tracer }
func (s *Driver) Metrics() metrics.Recorder                       { return s.metrics }
func (s *Driver) CleanupPace() sqlcoord.CleanupPace               { return s.pace }
func (s *Driver) CleanupDuty() float64                            { return s.pace.Duty }
func (s *Driver) Executor() dialects.Executor                     { return core.PoolExecutor(s.X, s.pre, s.dialect) }
func (s *Driver) TxExecutor(tx *sqlx.Tx) dialects.Executor        { return core.SQLExec{Q: tx, Pre: s.pre} }
func (s *Driver) CommitTx(_ context.Context, tx *sqlx.Tx) error   { return tx.Commit() }
func (s *Driver) RollbackTx(_ context.Context, tx *sqlx.Tx) error { return tx.Rollback() }
func (s *Driver) String() string                                  { return "sqlx pool (" + s.dialect.Name() + ")" }

// BeginTx starts a *sqlx.Tx.
func (s *Driver) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqlx.Tx, error) {
	return s.X.BeginTxx(ctx, opts)
}

// beginOwned starts a transaction sqlcoord commits itself.
func (s *Driver) beginOwned(ctx context.Context, opts *sql.TxOptions) (dialects.OwnedTx, error) {
	return core.BeginOwned(ctx, s.X.DB, opts, s.pre)
}

// CanListen: as the database/sql stack (PostgreSQL on pgx's stdlib driver,
// with package pgxv5 imported).
func (s *Driver) CanListen() error { return s.db.CanListen() }

// Listen: as the database/sql stack.
func (s *Driver) Listen(ctx context.Context, channel string, opt sqlcoord.ListenOptions, wake func()) error {
	return s.db.Listen(ctx, channel, opt, wake)
}
