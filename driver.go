package sqlcoord

import (
	"context"
	"database/sql"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// Base is what every driver offers whatever its transaction type: the
// dialect, autocommit statements on the pool, instrumentation and the
// failover-epoch mark. The implementations are this package's *DB,
// pgxv5.Driver and sqlxdriver.Driver; the interface is sealed (it embeds
// an interface of an internal package, which only those drivers satisfy),
// because it grows with sqlcoord: use it, do not implement it.
type Base interface {
	// Dialect is the database's dialect (sqlcoord's statements for it).
	Dialect() *dialects.Dialect
	// Executor runs autocommit statements on the pool.
	Executor() dialects.Executor
	// Epochs is the driver's failover-epoch high-water mark.
	Epochs() *Epochs
	// Tracer is the driver's tracer (nil: tracing off).
	Tracer() trace.Tracer
	// Metrics is the driver's Recorder (nil: off).
	Metrics() metrics.Recorder
	// CleanupPace is Options.CleanupDuty and Options.CleanupRate: how
	// the driver's cleanups pause between batches.
	CleanupPace() CleanupPace
	// String describes the database without credentials.
	String() string
	// what sqlcoord's own packages need of a driver beyond the above
	// (transactions sqlcoord commits itself: a lease acquire, a relay
	// batch), implemented by sqlcoord's drivers only
	core.Sealed
}

// Driver is one application stack: its pool and its transaction type TTx.
// Helpers that must run inside the caller's transaction take a TTx, so a
// pool where a transaction is required does not compile.
type Driver[TTx any] interface {
	Base
	// TxExecutor runs statements in the caller's transaction.
	TxExecutor(tx TTx) dialects.Executor
	BeginTx(ctx context.Context, opts *sql.TxOptions) (TTx, error)
	CommitTx(ctx context.Context, tx TTx) error
	RollbackTx(ctx context.Context, tx TTx) error
}

var _ Driver[*sql.Tx] = (*DB)(nil)

// Options tune Open and every Wrap (pgxv5 and sqlxdriver's too). The zero
// value is sensible.
type Options struct {
	// Pool sizing, for the pools Open makes (a wrapped pool is the
	// application's to size).
	MaxOpenConns    int           // default 20
	MaxIdleConns    int           // default 10
	ConnMaxLifetime time.Duration // default 30m
	ConnMaxIdleTime time.Duration // default 5m
	// Dialect is "postgres", "mysql" or "mariadb", or the name of a
	// dialect installed with dialects.Register (of the server's family);
	// "" detects it from the server's version string (a wrapped pool).
	Dialect string
	// Pooler: the pool reaches PostgreSQL through a transaction-mode
	// pooler (PgBouncer): sqlcoord's statements then run without named
	// prepared statements, whatever the connection's default mode. Open
	// sets default_query_exec_mode=exec in the DSN; a wrapped database/sql
	// pool on pgx's stdlib driver needs package pgxv5 imported. Not needed
	// when the pool's default_query_exec_mode is already exec,
	// cache_describe or simple_protocol, or with PgBouncer ≥ 1.21 and
	// max_prepared_statements set. See docs/pgbouncer.md.
	//
	// Open (a DSN without default_query_exec_mode) and pgxv5.Open/Wrap (a
	// pool in the default cache_statement mode) turn it on by themselves
	// when the server's port (inet_server_port()) is not the one
	// connected to — a pooler or proxy in between. They cannot tell
	// through a pooler that reaches PostgreSQL over a Unix socket, or
	// with several hosts in the DSN: set it there.
	Pooler bool
	// AllowReadOnly opens a server that refuses writes (a hot standby, a
	// read_only replica) instead of failing with ErrReadOnly — for
	// inspection only (sqlcoord doctor, listings).
	AllowReadOnly bool
	// RequireSyncReplication refuses (ErrNotSynchronous) a server whose
	// commits are acknowledged before a standby has them. Checked when the
	// pool is opened; the settings can change later (sqlcoord doctor).
	RequireSyncReplication bool
	// GaleraSingleWriter: on a MariaDB Galera cluster every client of this
	// database writes through one node, so row locks are allowed there. It
	// is checked: the node holds a writer lease (docs/failover.md), and a
	// client of another node is refused with ErrGaleraLocks. Without it,
	// row locks are refused on Galera.
	GaleraSingleWriter bool
	// EpochFile keeps the failover-epoch high-water mark (Epochs) in a
	// file, so that a restarted process still refuses a stale primary;
	// "" keeps it in memory. Opening refuses (ErrStalePrimary) a server
	// older than the mark in the file.
	EpochFile string
	// Metrics receives every helper's call durations and outcomes, txn.Do
	// retries, lease renewals, job runs and outbox publishes (package
	// metrics/prom for Prometheus). nil: off.
	Metrics metrics.Recorder
	// TracerProvider turns on OpenTelemetry spans for every helper; Enqueue
	// then also puts the W3C traceparent in each message's headers, and
	// the relay publishes in that trace. nil: off.
	TracerProvider trace.TracerProvider
	// CleanupDuty bounds the share of time a cleanup of this driver
	// spends deleting (every Cleanup — outbox, inbox, keys, barrier, job
	// runs, sessions, membership, sagas — and coord's CleanupLocks): after
	// each batch it pauses for as long as makes the batch CleanupDuty of
	// the time since the last one (0.25: three times the batch's own
	// duration). A busy server makes batches slower and so the pauses
	// longer: producers keep the database. 0 (the default) or 1: no pause,
	// as fast as the server deletes. Between 0 and 1, else
	// ErrInvalidOptions. See docs/retention.md.
	CleanupDuty float64
	// CleanupRate caps the rows per second a cleanup of this driver
	// deletes: after each batch it pauses until the batch's rows took at
	// least rows/CleanupRate seconds since the batch began. With
	// CleanupDuty too, the longer pause wins. A duty bounds time, not rows
	// (a server that deletes fast deletes more rows at the same duty); a
	// rate is the bound to size against your producers. 0 (the default):
	// no cap. Negative, NaN or infinite: ErrInvalidOptions.
	CleanupRate float64
}

// CleanupPace is how a driver's cleanups pause between batches
// (Options.CleanupDuty, Options.CleanupRate); the zero value: no pause.
type CleanupPace struct {
	Duty float64 // share of the time spent deleting; 0 or 1: no pause for it
	Rate float64 // rows per second at most; 0: no cap
}

// Inspect asks db's server about itself: version, read-only, replication
// (synchronous or not, standbys, WAL timeline, Galera).
func Inspect(ctx context.Context, db Base) (ServerInfo, error) {
	return db.Dialect().Inspect(ctx, db.Executor())
}

// openEpochs opens db's high-water mark (see core.OpenEpochs).
func openEpochs(ctx context.Context, db Base, file string, readOnly bool) (*Epochs, error) {
	return core.OpenEpochs(ctx, file, readOnly, func(ctx context.Context, e *Epochs) error {
		_, err := CurrentEpoch(ctx, &epochProbe{Base: db, e: e})
		return err
	})
}

// epochProbe is db with the mark being opened (db's own is not set yet).
type epochProbe struct {
	Base
	e *Epochs
}

func (p *epochProbe) Epochs() *Epochs { return p.e }
