// Package pgxv5 is sqlcoord's pgx stack: a *pgxpool.Pool as a
// sqlcoord.Driver[pgx.Tx], with no database/sql in between, so helpers
// take the application's pgx.Tx:
//
//	pool, _ := pgxpool.New(ctx, dsn)
//	d, err := pgxv5.Wrap(ctx, pool)          // or pgxv5.Open(ctx, dsn)
//	locks := coord.New(d)
//	err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx pgx.Tx) error {
//		return locks.TryLock(ctx, tx, "invoice:42")
//	})
//
// Importing it also gives a database/sql pool on pgx's stdlib driver
// (sqlcoord.Open, sqlcoord.WrapDB) LISTEN and the Pooler option.
package pgxv5

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// Driver is an application's *pgxpool.Pool as a sqlcoord.Driver[pgx.Tx].
// Statements run in the pool's default_query_exec_mode, or without named
// prepared statements with Options.Pooler.
type Driver struct {
	Pool    *pgxpool.Pool
	pre     []any
	epochs  *sqlcoord.Epochs
	tracer  trace.Tracer
	metrics metrics.Recorder
	pace    sqlcoord.CleanupPace // Options.CleanupDuty, Options.CleanupRate
	owned   bool                 // Open made the pool: Close closes it

	sqlOnce sync.Once
	sqlDB   *sql.DB // database/sql on Pool (migrate), made when first asked
	sealed          // owned transactions, executors of any transaction
}

// sealed is embedded by every driver of the module (see core.Plumbing).
type sealed = core.Plumbing

var (
	_ sqlcoord.Driver[pgx.Tx] = (*Driver)(nil)
	_ sqlcoord.Listener       = (*Driver)(nil)
)

// Wrap uses an application's own pool, after the connection check every
// sqlcoord Open and Wrap runs (a writable PostgreSQL server, replication
// when asked). sqlcoord never closes it.
func Wrap(ctx context.Context, pool *pgxpool.Pool, opts ...sqlcoord.Options) (*Driver, error) {
	var o sqlcoord.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if err := core.ValidCleanupPace(o.CleanupDuty, o.CleanupRate); err != nil {
		return nil, err
	}
	d := &Driver{Pool: pool, tracer: core.Tracer(o.TracerProvider), metrics: o.Metrics, pace: sqlcoord.CleanupPace{Duty: o.CleanupDuty, Rate: o.CleanupRate}}
	d.sealed = core.NewPlumbing(core.Stack{Begin: d.beginOwned, SQLDB: d.sqlView})
	if o.Pooler {
		d.pre = execMode
	}
	co := core.Options(o)
	co.Dialect = "postgres"
	if _, err := core.Check(ctx, d.Executor(), co, d.String()); err != nil {
		return nil, err
	}
	if d.pre == nil && pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement && behindPooler(ctx, pool) {
		d.pre = execMode // a pooler or proxy in between (see sqlcoord.Options.Pooler)
	}
	var err error
	if d.epochs, err = openEpochs(ctx, d, o); err != nil {
		return nil, err
	}
	return d, nil
}

// Open makes a pool for a PostgreSQL DSN (sqlcoord.ParseDSN's forms;
// pool sizing from Options) and wraps it; Close closes it. Every new
// connection checks it reached a writable server (target_session_attrs),
// unless Options.AllowReadOnly.
func Open(ctx context.Context, dsn string, opts ...sqlcoord.Options) (*Driver, error) {
	var o sqlcoord.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	family, driverDSN, shown, err := sqlcoord.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if family != "postgres" {
		return nil, errs.Errorf("%w: %s is not PostgreSQL (pgxv5 is the pgx stack)", sqlcoord.ErrBadDSN, shown)
	}
	cfg, err := pgxpool.ParseConfig(driverDSN)
	if err != nil {
		return nil, errs.Errorf("%w %s: %s", sqlcoord.ErrBadDSN, shown, redactErr(err, dsn))
	}
	if !o.AllowReadOnly {
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	if o.MaxOpenConns > 0 {
		cfg.MaxConns = int32(o.MaxOpenConns)
	}
	if o.ConnMaxLifetime > 0 {
		cfg.MaxConnLifetime = o.ConnMaxLifetime
	}
	if o.ConnMaxIdleTime > 0 {
		cfg.MaxConnIdleTime = o.ConnMaxIdleTime
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errs.Errorf("%w %s: %s", sqlcoord.ErrBadDSN, shown, redactErr(err, dsn))
	}
	d, err := Wrap(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, redact.Err(err, dsn)
	}
	d.owned = true
	return d, nil
}

// Close closes a pool Open made (a wrapped pool is the application's).
func (d *Driver) Close() {
	if d.owned {
		d.Pool.Close()
	}
}

func (d *Driver) Dialect() *dialects.Dialect                      { return dialects.Postgres }
func (d *Driver) Epochs() *sqlcoord.Epochs                        { return d.epochs }
func (d *Driver) Tracer() trace.Tracer                            { return d.tracer }
func (d *Driver) Metrics() metrics.Recorder                       { return d.metrics }
func (d *Driver) CleanupPace() sqlcoord.CleanupPace               { return d.pace }
func (d *Driver) CleanupDuty() float64                            { return d.pace.Duty }
func (d *Driver) Executor() dialects.Executor                     { return Executor{d.Pool, d.pre} }
func (d *Driver) TxExecutor(tx pgx.Tx) dialects.Executor          { return Executor{tx, d.pre} }
func (d *Driver) CommitTx(ctx context.Context, tx pgx.Tx) error   { return tx.Commit(ctx) }
func (d *Driver) RollbackTx(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }

// String describes the pool without credentials.
func (d *Driver) String() string {
	c := d.Pool.Config().ConnConfig
	return fmt.Sprintf("pgxpool %s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// BeginTx starts a pgx.Tx with the given isolation and access mode.
func (d *Driver) BeginTx(ctx context.Context, opts *sql.TxOptions) (pgx.Tx, error) {
	return d.Pool.BeginTx(ctx, TxOptions(opts))
}

// beginOwned starts a transaction sqlcoord commits itself.
func (d *Driver) beginOwned(ctx context.Context, opts *sql.TxOptions) (dialects.OwnedTx, error) {
	tx, err := d.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return owned{Executor{tx, d.pre}, tx}, nil
}

type owned struct {
	Executor
	tx pgx.Tx
}

func (t owned) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t owned) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// TxOptions turns database/sql transaction options into pgx's.
func TxOptions(o *sql.TxOptions) pgx.TxOptions {
	var t pgx.TxOptions
	if o == nil {
		return t
	}
	switch o.Isolation {
	case sql.LevelReadUncommitted:
		t.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		t.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		t.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable, sql.LevelLinearizable:
		t.IsoLevel = pgx.Serializable
	}
	if o.ReadOnly {
		t.AccessMode = pgx.ReadOnly
	}
	return t
}

// openEpochs reads the epoch file and checks the server against it (see
// sqlcoord.Options.EpochFile).
func openEpochs(ctx context.Context, d *Driver, o sqlcoord.Options) (*sqlcoord.Epochs, error) {
	return core.OpenEpochs(ctx, o.EpochFile, o.AllowReadOnly, func(ctx context.Context, e *sqlcoord.Epochs) error {
		d.epochs = e
		_, err := sqlcoord.CurrentEpoch(ctx, d)
		return err
	})
}

// behindPooler reports whether pool reaches PostgreSQL through something
// listening on another port than the server (a pooler such as PgBouncer,
// or a proxy): inet_server_port() differs from the configured port. It
// asks without a named prepared statement. False when it cannot tell.
func behindPooler(ctx context.Context, pool *pgxpool.Pool) bool {
	cfg := pool.Config().ConnConfig
	if len(cfg.Fallbacks) > 0 {
		return false
	}
	var port *int32
	if err := pool.QueryRow(ctx, "SELECT inet_server_port()", pgx.QueryExecModeExec).Scan(&port); err != nil || port == nil {
		return false
	}
	return uint16(*port) != cfg.Port
}

// PgConnConfig is a copy of the pool's connection settings (the outbox's
// streaming relay opens its replication connection with them).
func (d *Driver) PgConnConfig() *pgconn.Config { return d.Pool.Config().ConnConfig.Config.Copy() }

// sqlView is a database/sql view of the pool (for package migrate).
func (d *Driver) sqlView() *sql.DB {
	d.sqlOnce.Do(func() { d.sqlDB = stdlib.OpenDBFromPool(d.Pool) })
	return d.sqlDB
}
