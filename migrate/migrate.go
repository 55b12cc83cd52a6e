// Package migrate installs and upgrades sqlcoord's schema with
// golang-migrate: the embedded migrations (package sql) in their own
// bookkeeping table, coord_schema_migrations, apart from an application's
// schema_migrations. It is a package of its own so that applications that
// migrate with the CLI (`sqlcoord migrate up`) or their own tooling do not
// compile golang-migrate.
//
//	err := migrate.Migrate(ctx, db, migrate.Up)
package migrate

import (
	"context"
	"database/sql"
	"errors"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	sqlschema "github.com/sqlcoord/sqlcoord/sql"
)

// Target says where Migrate goes: Up, Down, or To(n).
type Target struct {
	kind    int // 0 up, 1 down, 2 to
	version uint
}

var (
	// Up applies every pending migration.
	Up = Target{kind: 0}
	// Down reverts every migration (drops all coord_ tables).
	Down = Target{kind: 1}
)

// To migrates up or down to version n (0 is the same as Down).
func To(n uint) Target { return Target{kind: 2, version: n} }

// ErrNeedsDSN: Migrate was given a pool whose connection settings sqlcoord
// cannot read (an application's own MySQL/MariaDB *sql.DB).
var ErrNeedsDSN = errors.New("sqlcoord: migrating needs the DSN: use a *sqlcoord.DB from Open, or `sqlcoord migrate up --dsn …`")

// Migrate moves the coord_ schema to target. It holds golang-migrate's
// database lock (advisory lock / GET_LOCK) while it runs, so concurrent
// callers are safe. Cancelling ctx stops after the migration in progress.
//
// db may be any driver: the migration runs on a dedicated connection made
// from the pool's own configuration (the DSN given to sqlcoord.Open, a
// pgxpool's or pgx stdlib pool's connection config). An application's
// own MySQL/MariaDB *sql.DB does not reveal its DSN: migrate it with a
// *sqlcoord.DB from Open or the CLI (ErrNeedsDSN).
//
// The package imports no database driver (the connection is made through
// the driver the application registered), so it compiles into a pgx
// application without the MySQL driver and into a MariaDB one without pgx.
//
// A database a newer release migrated (sqlcoord.Status.Ahead: after a
// rollback, or while a rolling deploy runs both) is left alone: Up is a
// no-op (nil, so an application that migrates at start-up keeps
// starting), Down and To refuse with a *sqlcoord.SchemaAheadError, since
// this release does not know the newer migrations.
func Migrate(ctx context.Context, db sqlcoord.Base, target Target) error {
	if st, err := sqlcoord.MigrationStatus(ctx, db); err == nil && st.Ahead {
		if target.kind == 0 {
			return nil
		}
		return &sqlcoord.SchemaAheadError{Version: st.Version, Latest: st.Latest}
	}
	if err := reversible(ctx, db, target); err != nil {
		return err
	}
	m, err := migrator(ctx, db)
	if err != nil {
		return err
	}
	defer m.Close()
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	// An empty database has no instance of an older sqlcoord locking rows:
	// the lock protocol can start advisory-only (see migration 14).
	_, _, verr := m.Version()
	fresh := errors.Is(verr, migrate.ErrNilVersion)
	switch target.kind {
	case 0:
		err = m.Up()
	case 1:
		err = m.Down()
	default:
		if target.version == 0 {
			err = m.Down()
		} else {
			err = m.Migrate(target.version)
		}
	}
	if errors.Is(err, migrate.ErrNoChange) {
		err = nil
	}
	var de migrate.ErrDirty
	if errors.As(err, &de) {
		return core.DirtyError(db.Dialect().Family(), uint(de.Version), nil)
	}
	var fe database.Error
	if errors.As(err, &fe) && fe.OrigErr != nil {
		// A migration failed: its whole SQL text (golang-migrate's
		// message) helps nobody; which one, where, and what next do.
		cause := db.Dialect().Classify(fe.OrigErr)
		if fe.Line > 0 {
			cause = errs.Errorf("line %d: %w", fe.Line, cause)
		}
		if v, dirty, verr := m.Version(); verr == nil && dirty {
			return core.DirtyError(db.Dialect().Family(), v, cause)
		}
		return errs.Errorf("sqlcoord: migrate: a migration failed: %w", cause)
	}
	if err != nil {
		return errs.Errorf("sqlcoord: migrate: %w", db.Dialect().Classify(err))
	}
	if fresh && target.kind != 1 && db.Dialect().Q().LockProtocolSet != "" {
		if v, _, err := m.Version(); err == nil && v >= sqlcoord.LockProtocolVersion {
			if err := sqlcoord.SetLockProtocol(ctx, db, sqlcoord.LocksAdvisory); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// ErrIrreversible: Down or To would undo a migration that something done
// since depends on; nothing ran.
var ErrIrreversible = errors.New("sqlcoord: migrate: the schema cannot go back that far")

// keyPeriodsVersion is the migration that partitions.EnableKeys builds on:
// undone, it would drop the period column of the partitioned keys' key.
const keyPeriodsVersion = 29

// reversible refuses, before anything runs, a move below
// keyPeriodsVersion while the idempotency keys are partitioned by period
// (the migration's own guard would fail half-way and leave the schema
// dirty).
func reversible(ctx context.Context, db sqlcoord.Base, target Target) error {
	if target.kind == 0 || (target.kind == 2 && target.version >= keyPeriodsVersion) {
		return nil
	}
	st, err := sqlcoord.MigrationStatus(ctx, db)
	if err != nil || st.Version < keyPeriodsVersion {
		return nil // nothing to protect (or Migrate reports the error)
	}
	var n int
	if err := db.Executor().QueryRow(ctx, `SELECT count(*) FROM coord_periods`).Scan(&n); err != nil || n == 0 {
		return nil
	}
	return errs.Errorf("%w: coord_idempotency is partitioned by period (partitions.EnableKeys), and migration %d holds its period: stay at %d or later", ErrIrreversible, keyPeriodsVersion, keyPeriodsVersion)
}

// ErrForce: Force was asked for a version the database cannot be at.
var ErrForce = errors.New("sqlcoord: migrate force refused")

// Force records version as the applied schema version and clears the
// dirty flag, without running any migration — after a failed migration
// was repaired by hand. It only repairs: the schema must be dirty at some
// version V (sqlcoord.ErrDirty says which), and version must be V (the
// repair completed migration V) or the version before it (the repair
// undid it). Anything else is refused with ErrForce: recording a version
// whose tables do not exist would make the next `up` fail half-way.
func Force(ctx context.Context, db sqlcoord.Base, version uint) error {
	all, err := sqlcoord.Versions(db.Dialect().Family())
	if err != nil {
		return err
	}
	known := version == 0
	for _, v := range all {
		known = known || v == version
	}
	if !known {
		return errs.Errorf("%w: %d is not a schema version (have %v)", ErrForce, version, all)
	}
	st, err := sqlcoord.MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	if !st.Dirty {
		return errs.Errorf("%w: the schema is not dirty (it is at version %d, nothing failed half-way): force only repairs a failed migration; move between versions with `sqlcoord migrate to %d`", ErrForce, st.Version, version)
	}
	prev := uint(0)
	for _, v := range all {
		if v < st.Version {
			prev = v
		}
	}
	if version != st.Version && version != prev {
		return errs.Errorf("%w: the schema is dirty at version %d, so it can only be at %d (migration %d completed by hand) or %d (undone): not %d", ErrForce, st.Version, st.Version, st.Version, prev, version)
	}
	m, err := migrator(ctx, db)
	if err != nil {
		return err
	}
	defer m.Close()
	v := int(version)
	if version == 0 {
		v = -1 // golang-migrate's "nothing applied"
	}
	if err := m.Force(v); err != nil {
		return errs.Errorf("sqlcoord: force: %w", db.Dialect().Classify(err))
	}
	return nil
}

// migrationConn is a dedicated connection for golang-migrate and what
// ends it: a pool of its own made from the DSN sqlcoord opened (MySQL:
// with multiStatements), else one connection of the application's pool
// (PostgreSQL only: an application's MySQL pool may not allow several
// statements in one Exec, and does not reveal its DSN).
func migrationConn(ctx context.Context, db sqlcoord.Base) (*sql.Conn, func(), error) {
	d := db.Dialect()
	if dsn := core.ConnString(db); dsn != "" {
		if d.Family() == "mysql" {
			dsn = withMultiStatements(dsn)
		}
		own, err := sql.Open(d.DriverName(), dsn)
		if err != nil {
			return nil, nil, err
		}
		own.SetMaxOpenConns(1)
		c, err := own.Conn(ctx)
		if err != nil {
			own.Close()
			return nil, nil, err
		}
		return c, func() { c.Close(); own.Close() }, nil
	}
	pool := core.SQLDB(db)
	if pool == nil || d.Family() != "postgres" {
		return nil, nil, errs.Errorf("%w (%T)", ErrNeedsDSN, db)
	}
	c, err := pool.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { c.Close() }, nil
}

// migrator returns a golang-migrate instance on a dedicated connection.
func migrator(ctx context.Context, db sqlcoord.Base) (*migrate.Migrate, error) {
	family := db.Dialect().Family()
	fsys, err := sqlschema.FS(family)
	if err != nil {
		return nil, err
	}
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return nil, err
	}
	c, done, err := migrationConn(ctx, db)
	if errors.Is(err, ErrNeedsDSN) {
		return nil, err
	}
	if err != nil {
		return nil, errs.Errorf("%w to %s: %w", sqlcoord.ErrUnreachable, db.String(), db.Dialect().Classify(err))
	}
	drv, err := openConn(ctx, c, db.Dialect(), pgxExecMode(family), done)
	if err != nil {
		done()
		return nil, errs.Errorf("sqlcoord: migrate: %w", db.Dialect().Classify(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, family, drv)
	if err != nil {
		drv.Close()
		return nil, errs.Errorf("sqlcoord: migrate: %w", err)
	}
	return m, nil
}
