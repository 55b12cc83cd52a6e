package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/metrics"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
)

// ErrNotATransaction: a helper that must run inside the caller's
// transaction was given something else (a pool, or another stack's
// transaction).
var ErrNotATransaction = errors.New("sqlcoord: not a transaction of this driver")

// ErrDriverSetting: a wrapped pool's driver is configured in a way sqlcoord
// cannot work with; the message names the setting.
var ErrDriverSetting = errors.New("sqlcoord: driver setting")

// Base is what every driver offers whatever its transaction type: the
// dialect, autocommit statements on the pool, and transactions sqlcoord
// owns (a lease acquire, a segment fetch, a relay batch).
type Base interface {
	Dialect() *dialects.Dialect
	// Executor runs autocommit statements on the pool.
	Executor() Executor
	// BeginOwned starts a transaction that sqlcoord itself commits.
	BeginOwned(ctx context.Context, opts *sql.TxOptions) (OwnedTx, error)
	// ExecutorFor returns the executor of tx when tx is a transaction of
	// this driver's stack, and an error matching ErrNotATransaction
	// otherwise (used where the transaction type cannot be a type
	// parameter, e.g. jobs.Info.Fence).
	ExecutorFor(tx any) (Executor, error)
	// String describes the database without credentials.
	String() string
	// Epochs is the driver's failover-epoch high-water mark.
	Epochs() *Epochs
}

// OwnedTx is a transaction sqlcoord began through BeginOwned.
type OwnedTx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Driver is one application stack: its pool and its transaction type TTx.
// Helpers that must run inside the caller's transaction take a TTx, so a
// pool where a transaction is required does not compile. The
// implementations are *DB (database/sql, *sql.Tx), *SQLX (*sqlx.Tx) and
// *Pgx (pgx-native, pgx.Tx). The interface may grow: implement it only by
// embedding one of these.
type Driver[TTx any] interface {
	Base
	// TxExecutor runs statements in the caller's transaction.
	TxExecutor(tx TTx) Executor
	BeginTx(ctx context.Context, opts *sql.TxOptions) (TTx, error)
	CommitTx(ctx context.Context, tx TTx) error
	RollbackTx(ctx context.Context, tx TTx) error
}

var (
	_ Driver[*sql.Tx]  = (*DB)(nil)
	_ Driver[*sqlx.Tx] = (*SQLX)(nil)
	_ Driver[pgx.Tx]   = (*Pgx)(nil)
)

// ---- tracing ----

// tracerName is the instrumentation scope of sqlcoord's spans.
const tracerName = "github.com/sqlcoord/sqlcoord"

// tracerOf returns the tracer of tp, or nil when tp is nil (tracing off).
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// SetTracerProvider turns on OpenTelemetry spans for every helper called
// with this driver (lock, lease, fence, keys, barrier, enqueue, relay batch
// and publish, job run), with the dialect and the outcome; nil turns them
// off (the default). Enqueue then also puts the W3C traceparent in each
// message's headers, and the relay publishes in that trace.
func (db *DB) SetTracerProvider(tp trace.TracerProvider) { db.tracer = tracerOf(tp) }

// Tracer is the driver's tracer (nil: tracing off).
func (db *DB) Tracer() trace.Tracer { return db.tracer }

// SetTracerProvider: see DB.SetTracerProvider.
func (s *SQLX) SetTracerProvider(tp trace.TracerProvider) { s.tracer = tracerOf(tp) }

// Tracer is the driver's tracer (nil: tracing off).
func (s *SQLX) Tracer() trace.Tracer { return s.tracer }

// SetTracerProvider: see DB.SetTracerProvider.
func (p *Pgx) SetTracerProvider(tp trace.TracerProvider) { p.tracer = tracerOf(tp) }

// Tracer is the driver's tracer (nil: tracing off).
func (p *Pgx) Tracer() trace.Tracer { return p.tracer }

// SetMetrics gives every helper called with this driver a Recorder
// (metrics/prom.New for Prometheus): call durations and outcomes, txn.Do
// retries and unknown commits, lease renewal failures, job runs and
// takeovers, outbox publishes. Nil turns it off (the default). Set it
// before use; it is not synchronised with calls in flight.
func (db *DB) SetMetrics(r metrics.Recorder) { db.metrics = r }

// Metrics is the driver's Recorder (nil: off).
func (db *DB) Metrics() metrics.Recorder { return db.metrics }

// SetMetrics: see DB.SetMetrics.
func (s *SQLX) SetMetrics(r metrics.Recorder) { s.metrics = r }

// Metrics is the driver's Recorder (nil: off).
func (s *SQLX) Metrics() metrics.Recorder { return s.metrics }

// SetMetrics: see DB.SetMetrics.
func (p *Pgx) SetMetrics(r metrics.Recorder) { p.metrics = r }

// Metrics is the driver's Recorder (nil: off).
func (p *Pgx) Metrics() metrics.Recorder { return p.metrics }

// ---- database/sql: *DB ----

// Dialect is the database's dialect (detected from the server).
func (db *DB) Dialect() *dialects.Dialect { return db.dialect }

// Epochs is the pool's failover-epoch high-water mark.
func (db *DB) Epochs() *Epochs { return db.epochs }

// Executor runs autocommit statements on db's pool.
func (db *DB) Executor() Executor { return poolExecutor(db.DB.DB, db.pre, db.dialect) }

// TxExecutor runs statements in tx.
func (db *DB) TxExecutor(tx *sql.Tx) Executor { return sqlExec{q: tx, pre: db.pre} }

// CommitTx commits tx.
func (db *DB) CommitTx(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

// RollbackTx rolls tx back.
func (db *DB) RollbackTx(_ context.Context, tx *sql.Tx) error { return tx.Rollback() }

// BeginOwned starts a transaction sqlcoord commits itself.
func (db *DB) BeginOwned(ctx context.Context, opts *sql.TxOptions) (OwnedTx, error) {
	tx, err := db.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return sqlOwned{sqlExec{q: tx, pre: db.pre}, tx}, nil
}

// ExecutorFor accepts a *sql.Tx (or a *sqlx.Tx).
func (db *DB) ExecutorFor(tx any) (Executor, error) { return sqlTxExecutor(tx, "database/sql", db.pre) }

func sqlTxExecutor(tx any, stack string, pre []any) (Executor, error) {
	switch t := tx.(type) {
	case *sql.Tx:
		return sqlExec{q: t, pre: pre}, nil
	case *sqlx.Tx:
		return sqlExec{q: t, pre: pre}, nil
	}
	return nil, fmt.Errorf("%w: got %T, want the %s transaction (*sql.Tx or *sqlx.Tx)", ErrNotATransaction, tx, stack)
}

type sqlOwned struct {
	sqlExec
	tx *sql.Tx
}

func (t sqlOwned) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlOwned) Rollback(context.Context) error { return t.tx.Rollback() }

// WrapOptions tune the Wrap constructors.
type WrapOptions struct {
	// Dialect is "postgres", "mysql" or "mariadb"; "" detects it from the
	// server's version string.
	Dialect string
	// Pooler: the pool reaches PostgreSQL through a transaction-mode
	// pooler (PgBouncer). sqlcoord's statements then run in
	// pgx.QueryExecModeExec (no named prepared statements) whatever the
	// connection's default_query_exec_mode. Not needed when that is
	// already exec, cache_describe or simple_protocol (your own queries
	// need one of those behind such a pooler anyway), or with PgBouncer
	// ≥ 1.21 and max_prepared_statements set. See README "PgBouncer".
	Pooler bool
	// AllowReadOnly wraps a pool on a server that refuses writes instead
	// of failing with dialects.ErrReadOnly (inspection only). Only the
	// server the wrap reached is checked: a pool that later reconnects
	// elsewhere is the application's to point (for pgx, use
	// target_session_attrs=read-write in its DSN).
	AllowReadOnly bool
	// RequireSyncReplication: see Options.RequireSyncReplication.
	RequireSyncReplication bool
	// EpochFile: see Options.EpochFile.
	EpochFile string
	// GaleraSingleWriter: see Options.GaleraSingleWriter. On Galera the
	// application's pool should also use interpolateParams=true (see
	// dialects.Galera); sqlcoord cannot see its DSN to check.
	GaleraSingleWriter bool
}

func wrapOptions(opts []WrapOptions) WrapOptions {
	if len(opts) > 0 {
		return opts[0]
	}
	return WrapOptions{}
}

// WrapDB uses an application's own *sql.DB (pgx's stdlib driver, or
// go-sql-driver/mysql). sqlcoord never closes it. For MySQL/MariaDB the
// driver must parse DATETIME into time.Time in UTC (parseTime=true, and no
// loc other than UTC); WrapDB checks that and names the setting if not.
// clientFoundRows is not needed.
func WrapDB(ctx context.Context, db *sql.DB, opts ...WrapOptions) (*DB, error) {
	pre := poolerArgs(db, wrapOptions(opts).Pooler)
	d, err := detect(ctx, sqlExec{q: db, pre: pre}, opts)
	if err != nil {
		return nil, err
	}
	out := &DB{DB: sqlx.NewDb(db, d.DriverName()), dialect: d, pre: pre, shown: "database/sql pool (" + d.Name() + ")"}
	if out.epochs, err = openEpochs(ctx, out, wrapOptions(opts).EpochFile, wrapOptions(opts).AllowReadOnly); err != nil {
		return nil, err
	}
	return out, nil
}

// detect finds (or takes) the dialect and checks what sqlcoord needs of
// the driver.
func detect(ctx context.Context, e Executor, opts []WrapOptions) (*dialects.Dialect, error) {
	o := wrapOptions(opts)
	var version string
	if err := e.QueryRow(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	var d *dialects.Dialect
	if o.Dialect != "" {
		var err error
		if d, err = dialects.ByFamily(o.Dialect); err != nil {
			return nil, err
		}
	} else {
		switch v := strings.ToLower(version); {
		case strings.Contains(v, "postgres"):
			d = dialects.Postgres
		case strings.Contains(v, "mariadb"):
			d = dialects.MariaDB
		default:
			d = dialects.MySQL
		}
		if d.Family() == "mysql" {
			galera, err := dialects.IsGalera(ctx, e)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
			}
			if galera {
				d = galeraDialect(o.GaleraSingleWriter)
				if o.GaleraSingleWriter {
					// the application's pool: the writer stops renewing
					// when the application closes it
					w, err := startGaleraWriter(ctx, e)
					if err != nil {
						return nil, err
					}
					d = dialects.NewGaleraWriter(w.check)
				}
				if !o.GaleraSingleWriter {
					var w int
					if err := e.QueryRow(ctx, `SELECT @@session.wsrep_sync_wait`).Scan(&w); err != nil {
						return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
					}
					if w&3 != 3 {
						return nil, fmt.Errorf("%w: on a multi-writer Galera cluster the pool needs causal reads: add wsrep_sync_wait=%s to the DSN (or GaleraSingleWriter if every client writes through one node)", ErrDriverSetting, dialects.GaleraSyncWait)
					}
				}
			}
		}
	}
	if !o.AllowReadOnly {
		var ro bool
		if err := e.QueryRow(ctx, d.Q.ReadOnly).Scan(&ro); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		if ro {
			return nil, fmt.Errorf("%w: the wrapped pool reached a hot standby or a read-only replica; point it at the primary (or set AllowReadOnly to inspect)", dialects.ErrReadOnly)
		}
	}
	if o.RequireSyncReplication {
		if err := requireSync(ctx, d, e); err != nil {
			return nil, err
		}
	}
	if d.Family() == "mysql" {
		var now time.Time
		if err := e.QueryRow(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&now); err != nil {
			return nil, fmt.Errorf("%w: the MySQL driver must return DATETIME as time.Time: add parseTime=true to the DSN (%v)", ErrDriverSetting, err)
		}
		if now.Location() != time.UTC {
			return nil, fmt.Errorf("%w: the MySQL driver reads DATETIME in %v: use loc=UTC (the default) in the DSN", ErrDriverSetting, now.Location())
		}
	}
	return d, nil
}

// ---- sqlx: *SQLX ----

// SQLX is an application's own *sqlx.DB as a Driver[*sqlx.Tx]: helpers
// take the application's *sqlx.Tx, and txn.Do hands one to its callback
// (with the driver name kept, so NamedExec and Rebind work).
type SQLX struct {
	X       *sqlx.DB
	epochs  *Epochs
	dialect *dialects.Dialect
	pre     []any // see poolerArgs
	tracer  trace.Tracer
	metrics metrics.Recorder
}

// WrapSQLX uses an application's own *sqlx.DB; see WrapDB for the checks.
// sqlcoord never closes it.
func WrapSQLX(ctx context.Context, x *sqlx.DB, opts ...WrapOptions) (*SQLX, error) {
	pre := poolerArgs(x.DB, wrapOptions(opts).Pooler)
	d, err := detect(ctx, sqlExec{q: x, pre: pre}, opts)
	if err != nil {
		return nil, err
	}
	s := &SQLX{X: x, dialect: d, pre: pre}
	if s.epochs, err = openEpochs(ctx, s, wrapOptions(opts).EpochFile, wrapOptions(opts).AllowReadOnly); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *SQLX) Dialect() *dialects.Dialect                      { return s.dialect }
func (s *SQLX) Epochs() *Epochs                                 { return s.epochs }
func (s *SQLX) Executor() Executor                              { return poolExecutor(s.X, s.pre, s.dialect) }
func (s *SQLX) TxExecutor(tx *sqlx.Tx) Executor                 { return sqlExec{q: tx, pre: s.pre} }
func (s *SQLX) CommitTx(_ context.Context, tx *sqlx.Tx) error   { return tx.Commit() }
func (s *SQLX) RollbackTx(_ context.Context, tx *sqlx.Tx) error { return tx.Rollback() }
func (s *SQLX) ExecutorFor(tx any) (Executor, error)            { return sqlTxExecutor(tx, "sqlx", s.pre) }
func (s *SQLX) String() string                                  { return "sqlx pool (" + s.dialect.Name() + ")" }

// BeginTx starts a *sqlx.Tx.
func (s *SQLX) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqlx.Tx, error) {
	return s.X.BeginTxx(ctx, opts)
}

// BeginOwned starts a transaction sqlcoord commits itself.
func (s *SQLX) BeginOwned(ctx context.Context, opts *sql.TxOptions) (OwnedTx, error) {
	tx, err := s.X.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return sqlOwned{sqlExec{q: tx, pre: s.pre}, tx}, nil
}

// ---- pgx: *Pgx ----

// Pgx is an application's *pgxpool.Pool as a Driver[pgx.Tx], pgx-native
// (no database/sql in between): helpers take the application's pgx.Tx.
// Statements run in the pool's default_query_exec_mode, or in
// pgx.QueryExecModeExec with WrapOptions.Pooler.
type Pgx struct {
	Pool    *pgxpool.Pool
	epochs  *Epochs
	pre     []any // see poolerArgs
	tracer  trace.Tracer
	metrics metrics.Recorder
}

// WrapPgxPool uses an application's own pool; sqlcoord never closes it.
// The dialect is PostgreSQL whatever opts says.
func WrapPgxPool(ctx context.Context, pool *pgxpool.Pool, opts ...WrapOptions) (*Pgx, error) {
	o := wrapOptions(opts)
	p := &Pgx{Pool: pool, pre: poolerArgs(nil, o.Pooler)}
	o.Dialect = "postgres"
	if _, err := detect(ctx, p.Executor(), []WrapOptions{o}); err != nil {
		return nil, err
	}
	var err error
	if p.epochs, err = openEpochs(ctx, p, o.EpochFile, o.AllowReadOnly); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Pgx) Dialect() *dialects.Dialect                      { return dialects.Postgres }
func (p *Pgx) Epochs() *Epochs                                 { return p.epochs }
func (p *Pgx) Executor() Executor                              { return pgxExec{p.Pool, p.pre} }
func (p *Pgx) TxExecutor(tx pgx.Tx) Executor                   { return pgxExec{tx, p.pre} }
func (p *Pgx) CommitTx(ctx context.Context, tx pgx.Tx) error   { return tx.Commit(ctx) }
func (p *Pgx) RollbackTx(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }

func (p *Pgx) String() string {
	c := p.Pool.Config().ConnConfig
	return fmt.Sprintf("pgxpool %s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// ExecutorFor accepts a pgx.Tx.
func (p *Pgx) ExecutorFor(tx any) (Executor, error) {
	if t, ok := tx.(pgx.Tx); ok {
		return pgxExec{t, p.pre}, nil
	}
	return nil, fmt.Errorf("%w: got %T, want a pgx.Tx", ErrNotATransaction, tx)
}

// BeginTx starts a pgx.Tx with the given isolation and access mode.
func (p *Pgx) BeginTx(ctx context.Context, opts *sql.TxOptions) (pgx.Tx, error) {
	return p.Pool.BeginTx(ctx, pgxTxOptions(opts))
}

// BeginOwned starts a transaction sqlcoord commits itself.
func (p *Pgx) BeginOwned(ctx context.Context, opts *sql.TxOptions) (OwnedTx, error) {
	tx, err := p.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return pgxOwned{pgxExec{tx, p.pre}, tx}, nil
}

// SQLDB returns a database/sql view of the pool (for migrations).
func (p *Pgx) SQLDB() *sql.DB { return stdlib.OpenDBFromPool(p.Pool) }

type pgxOwned struct {
	pgxExec
	tx pgx.Tx
}

func (t pgxOwned) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxOwned) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

func pgxTxOptions(o *sql.TxOptions) pgx.TxOptions {
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
