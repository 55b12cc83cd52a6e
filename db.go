package sqlcoord

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// DB is a database/sql pool that knows its dialect: the database/sql
// stack, whose transactions are *sql.Tx. It embeds *sql.DB, so it is a
// *sql.DB for everything database/sql offers.
type DB struct {
	*sql.DB

	dialect *dialects.Dialect  // detected from the server
	epochs  *Epochs            // failover-epoch high-water mark
	writer  *core.GaleraWriter // GaleraSingleWriter: this node's writer lease
	pre     []any              // statement-mode arguments (Pooler on pgx's stdlib driver)
	tracer  trace.Tracer       // nil: tracing off
	metrics metrics.Recorder   // nil: off
	pace    CleanupPace        // Options.CleanupDuty, Options.CleanupRate
	dsn     string             // driver DSN with every option sqlcoord needs ("" when wrapped)
	shown   string             // DSN with the password replaced, for messages
	sealed                     // owned transactions, executors of any transaction
}

// sealed is embedded by every driver of the module (see core.Plumbing).
type sealed = core.Plumbing

func first(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}

// Open parses dsn (see ParseDSN), opens a database/sql pool with the
// database/sql driver registered for its family — "pgx" (import
// github.com/jackc/pgx/v5/stdlib) or "mysql" (import
// github.com/go-sql-driver/mysql) — and runs the connection check every
// Wrap runs too: dialect, writable server, Galera, replication (Options).
//
// PostgreSQL pools check every new connection reached a writable server
// (target_session_attrs=read-write: with several hosts in the DSN, pgx
// picks the one that is). MySQL/MariaDB pools get parseTime, loc=UTC,
// clientFoundRows and interpolateParams, and reset a session idle timeout
// set by coord.Client.SetIdleTimeout before a connection is reused.
// Errors and String() never contain the password, in any DSN form.
func Open(ctx context.Context, dsn string, opts ...Options) (*DB, error) {
	o := first(opts)
	if err := core.ValidCleanupPace(o.CleanupDuty, o.CleanupRate); err != nil {
		return nil, err
	}
	family, driverDSN, shown, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	name := "mysql"
	if family == "postgres" {
		name = "pgx"
		if !o.AllowReadOnly {
			driverDSN = withPGParam(driverDSN, "target_session_attrs", "read-write")
		}
		if o.Pooler {
			driverDSN = withPGParam(driverDSN, "default_query_exec_mode", "exec")
		}
	}
	sdb, err := openPool(name, driverDSN, shown, dsn)
	if err != nil {
		return nil, err
	}
	setPool(sdb, o)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	d := dialects.Postgres
	if family == "mysql" {
		d = dialects.MariaDB
	}
	if err := sdb.PingContext(pctx); err != nil {
		sdb.Close()
		if errors.Is(d.Classify(err), ErrReadOnly) {
			return nil, redact.Error{Msg: fmt.Sprintf("%v: %s is a hot standby or a read-only replica; connect to the primary (Options.AllowReadOnly opens it for reading; the CLI's read-only commands and doctor do)", ErrReadOnly, shown), Err: d.Classify(err)}
		}
		return nil, redact.Error{Msg: fmt.Sprintf("%v to %s: %s", ErrUnreachable, shown, redactErr(err, dsn)), Err: errors.Join(ErrUnreachable, d.Classify(err))}
	}
	if family == "postgres" && !strings.Contains(driverDSN, "default_query_exec_mode=") && behindPooler(pctx, name, driverDSN) {
		// A pooler or proxy in between: sqlcoord's statements (and the
		// pool's) must not use named prepared statements, which a
		// transaction-mode pooler hands to other clients' sessions.
		sdb.Close()
		driverDSN = withPGParam(driverDSN, "default_query_exec_mode", "exec")
		if sdb, err = openPool(name, driverDSN, shown, dsn); err != nil {
			return nil, err
		}
		setPool(sdb, o)
	}
	if family == "mysql" && !o.GaleraSingleWriter && mysqlParam(driverDSN, "wsrep_sync_wait") == "" {
		// On a multi-writer Galera cluster, causal reads: a statement
		// waits until this node has applied what the cluster committed
		// before it, so an UPDATE never misses a row written on another
		// node.
		galera, err := dialects.IsGalera(pctx, core.SQLExec{Q: sdb})
		if err != nil {
			sdb.Close()
			return nil, redact.Error{Msg: fmt.Sprintf("%v to %s: %s", ErrUnreachable, shown, redactErr(err, dsn)), Err: errors.Join(ErrUnreachable, d.Classify(err))}
		}
		if galera {
			sdb.Close()
			driverDSN = withMySQLParam(driverDSN, "wsrep_sync_wait", dialects.GaleraSyncWait)
			if sdb, err = openPool(name, driverDSN, shown, dsn); err != nil {
				return nil, err
			}
			setPool(sdb, o)
		}
	}
	co := core.Options(o)
	co.Dialect = ""
	checked, err := core.Check(pctx, core.PoolExecutor(sdb, nil, d), co, shown)
	if err != nil {
		sdb.Close()
		return nil, redact.Error{Msg: redactErr(err, dsn), Err: err}
	}
	db := &DB{DB: sdb, dialect: checked.Dialect, writer: checked.Writer, dsn: driverDSN, shown: shown,
		tracer: core.Tracer(o.TracerProvider), metrics: o.Metrics, pace: CleanupPace{o.CleanupDuty, o.CleanupRate}}
	db.sealed = core.NewPlumbing(db.stack())
	if db.epochs, err = openEpochs(pctx, db, o.EpochFile, o.AllowReadOnly); err != nil {
		db.Close()
		return nil, errs.Errorf("%s: %w", shown, err)
	}
	return db, nil
}

// openPool opens a database/sql pool on the registered driver name. The
// driver's connector parses the DSN now (a bad one is ErrBadDSN, not a
// failed connection later); MySQL connections reset what sqlcoord set on
// their session (sessionreset.go).
func openPool(name, driverDSN, shown, dsn string) (*sql.DB, error) {
	if !slices.Contains(sql.Drivers(), name) {
		imp := map[string]string{"pgx": "github.com/jackc/pgx/v5/stdlib (or use package pgxv5)", "mysql": "github.com/go-sql-driver/mysql"}[name]
		return nil, errs.Errorf("%w %s: the %q database/sql driver is not registered: import _ %q", ErrBadDSN, shown, name, imp)
	}
	if name == "pgx" && core.PgxParseConfig != nil {
		if err := core.PgxParseConfig(driverDSN); err != nil { // a parameter that does not parse
			return nil, redact.Error{Msg: fmt.Sprintf("%v %s: %s", ErrBadDSN, shown, redactErr(err, dsn)), Err: ErrBadDSN}
		}
	}
	probe, err := sql.Open(name, driverDSN)
	if err != nil { // the driver parses the DSN here (go-sql-driver/mysql)
		return nil, redact.Error{Msg: fmt.Sprintf("%v %s: %s", ErrBadDSN, shown, redactErr(err, dsn)), Err: ErrBadDSN}
	}
	drv := probe.Driver()
	probe.Close()
	dc, ok := drv.(driver.DriverContext)
	if !ok {
		return nil, errs.Errorf("%w %s: the %q driver (%T) has no connector", ErrBadDSN, shown, name, drv)
	}
	c, err := dc.OpenConnector(driverDSN)
	if err != nil {
		return nil, redact.Error{Msg: fmt.Sprintf("%v %s: %s", ErrBadDSN, shown, redactErr(err, dsn)), Err: ErrBadDSN}
	}
	if name == "mysql" {
		c = resetConnector{c}
	}
	return sql.OpenDB(c), nil
}

func setPool(db *sql.DB, o Options) {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	defd := func(v, d time.Duration) time.Duration {
		if v <= 0 {
			return d
		}
		return v
	}
	db.SetMaxOpenConns(def(o.MaxOpenConns, 20))
	db.SetMaxIdleConns(def(o.MaxIdleConns, 10))
	db.SetConnMaxLifetime(defd(o.ConnMaxLifetime, 30*time.Minute))
	db.SetConnMaxIdleTime(defd(o.ConnMaxIdleTime, 5*time.Minute))
}

// WrapDB uses an application's own *sql.DB (pgx's stdlib driver, or
// go-sql-driver/mysql), after the same connection check as Open. For
// MySQL/MariaDB the driver must parse DATETIME into time.Time in UTC
// (parseTime=true, and no loc other than UTC); WrapDB checks that and
// names the setting if not. clientFoundRows is not needed. sqlcoord never
// closes the pool (unless you call Close on the result).
func WrapDB(ctx context.Context, db *sql.DB, opts ...Options) (*DB, error) {
	o := first(opts)
	if err := core.ValidCleanupPace(o.CleanupDuty, o.CleanupRate); err != nil {
		return nil, err
	}
	var pre []any
	if o.Pooler && core.IsPgxStdlib(db) {
		if core.PgxExecMode == nil {
			return nil, errs.Errorf("%w: Pooler on a pgx stdlib pool needs package github.com/sqlcoord/sqlcoord/pgxv5 imported (or default_query_exec_mode=exec in the pool's DSN)", ErrDriverSetting)
		}
		pre = []any{core.PgxExecMode}
	}
	checked, err := core.Check(ctx, core.SQLExec{Q: db, Pre: pre}, core.Options(o), "the wrapped database/sql pool")
	if err != nil {
		return nil, err
	}
	out := &DB{DB: db, dialect: checked.Dialect, writer: checked.Writer, pre: pre,
		shown: "database/sql pool (" + checked.Dialect.Name() + ")", tracer: core.Tracer(o.TracerProvider), metrics: o.Metrics, pace: CleanupPace{o.CleanupDuty, o.CleanupRate}}
	out.sealed = core.NewPlumbing(out.stack())
	if out.epochs, err = openEpochs(ctx, out, o.EpochFile, o.AllowReadOnly); err != nil {
		return nil, err
	}
	return out, nil
}

// Close closes the pool (and, with GaleraSingleWriter, first releases
// this node's writer lease so another node can take over at once).
func (db *DB) Close() error {
	if db.writer != nil {
		db.writer.Close()
	}
	return db.DB.Close()
}

// String is the DSN with its password hidden.
func (db *DB) String() string { return db.shown }

// DSN returns the DSN sqlcoord opened with its password hidden (as
// String; "" for a wrapped pool). No exported method returns the password:
// the application has its DSN already.
func (db *DB) DSN() string {
	if db.dsn == "" {
		return ""
	}
	return db.shown
}

// Dialect is the database's dialect (detected from the server).
func (db *DB) Dialect() *dialects.Dialect { return db.dialect }

// Epochs is the pool's failover-epoch high-water mark.
func (db *DB) Epochs() *Epochs { return db.epochs }

// Tracer is the pool's tracer (nil: tracing off).
func (db *DB) Tracer() trace.Tracer { return db.tracer }

// Metrics is the pool's Recorder (nil: off).
func (db *DB) Metrics() metrics.Recorder { return db.metrics }

// CleanupPace is Options.CleanupDuty and Options.CleanupRate.
func (db *DB) CleanupPace() CleanupPace { return db.pace }

// CleanupDuty is Options.CleanupDuty (CleanupPace().Duty).
func (db *DB) CleanupDuty() float64 { return db.pace.Duty }

// ownConn is a connection for sqlcoord's own use beside the pool (a
// MySQL-family waiter sleeps on it until woken): a new connection to the
// DSN Open was given, or, for a wrapped pool (no DSN), one of the pool's
// connections, held until close.
func (db *DB) ownConn(ctx context.Context) (x dialects.Executor, close func() error, err error) {
	if db.dsn != "" {
		if dc, ok := db.DB.Driver().(driver.DriverContext); ok {
			conn, err := dc.OpenConnector(db.dsn)
			if err != nil {
				return nil, nil, redact.Error{Msg: fmt.Sprintf("%v to %s: %s", ErrUnreachable, db.shown, redactErr(err, db.dsn)), Err: err}
			}
			own := sql.OpenDB(conn)
			own.SetMaxOpenConns(1)
			c, err := own.Conn(ctx)
			if err != nil {
				own.Close()
				return nil, nil, redact.Error{Msg: fmt.Sprintf("%v to %s: %s", ErrUnreachable, db.shown, redactErr(err, db.dsn)), Err: errors.Join(ErrUnreachable, db.dialect.Classify(err))}
			}
			return core.SQLExec{Q: c}, func() error { c.Close(); return own.Close() }, nil
		}
	}
	c, err := db.DB.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return core.SQLExec{Q: c}, c.Close, nil
}

// Executor runs autocommit statements on the pool.
func (db *DB) Executor() dialects.Executor { return core.PoolExecutor(db.DB, db.pre, db.dialect) }

// TxExecutor runs statements in tx.
func (db *DB) TxExecutor(tx *sql.Tx) dialects.Executor { return core.SQLExec{Q: tx, Pre: db.pre} }

// CommitTx commits tx.
func (db *DB) CommitTx(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

// RollbackTx rolls tx back.
func (db *DB) RollbackTx(_ context.Context, tx *sql.Tx) error { return tx.Rollback() }

// stack is what sqlcoord's own packages use of db beyond Base.
func (db *DB) stack() core.Stack {
	return core.Stack{Begin: db.beginOwned, OwnConn: db.ownConn, ConnString: func() string { return db.dsn },
		SQLDB: func() *sql.DB { return db.DB }}
}

// beginOwned starts a transaction sqlcoord commits itself.
func (db *DB) beginOwned(ctx context.Context, opts *sql.TxOptions) (dialects.OwnedTx, error) {
	return core.BeginOwned(ctx, db.DB, opts, db.pre)
}

// Rebind turns a query written with ? placeholders into the dialect's
// ($1, $2, … on PostgreSQL). It does not look inside quoted strings.
func (db *DB) Rebind(query string) string {
	if db.dialect.Family() != "postgres" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
