package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlcoord/sqlcoord/dialects"
	sqlschema "github.com/sqlcoord/sqlcoord/sql"
)

// MigrationsTable is golang-migrate's bookkeeping table for sqlcoord's own
// schema; it is separate from an application's schema_migrations.
const MigrationsTable = "coord_schema_migrations"

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

// ErrDirty is returned when a previous migration failed half-way;
// golang-migrate's "force" is then needed after inspecting the database.
var ErrDirty = errors.New("sqlcoord: schema is dirty (a migration failed half-way)")

// Status is the schema state of a database.
type Status struct {
	Version uint   // applied version, 0 when none
	Dirty   bool   // a migration failed half-way
	Latest  uint   // newest version this build of sqlcoord ships
	Pending []uint // versions not yet applied
}

// Migrate moves the coord_ schema to target. It holds golang-migrate's
// database lock (advisory lock / GET_LOCK) while it runs, so concurrent
// callers are safe. Cancelling ctx stops after the migration in progress.
//
// db may be any driver: sqlcoord opens a dedicated connection for the
// migration from the pool's own configuration (the DSN given to Open, a
// pgxpool's or pgx stdlib pool's connection config). An application's
// own MySQL/MariaDB *sql.DB does not reveal its DSN: migrate it with a
// *DB from Open or the CLI (ErrMigrateNeedsDSN).
func Migrate(ctx context.Context, db Base, target Target) error {
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
		return fmt.Errorf("%w at version %d", ErrDirty, de.Version)
	}
	if err != nil {
		return fmt.Errorf("sqlcoord: migrate: %w", db.Dialect().Classify(err))
	}
	if fresh && target.kind != 1 && db.Dialect().Q.LockProtocolSet != "" {
		if v, _, err := m.Version(); err == nil && v >= lockProtocolVersion {
			if err := SetLockProtocol(ctx, db, LocksAdvisory); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// ErrLockProtocol: the lock protocol cannot be read or changed (MySQL
// family, or a schema older than version 15).
var ErrLockProtocol = errors.New("sqlcoord: lock protocol")

// LockProtocolMode says how locks are taken (see LockProtocol).
type LockProtocolMode string

const (
	// LocksAdvisory (PostgreSQL): one transaction-scoped advisory lock on
	// a 64-bit hash of the name; nothing written, no row needed. Safe once
	// every instance runs a sqlcoord of schema version 15 or later.
	LocksAdvisory LockProtocolMode = "advisory"
	// LocksAdvisoryID (PostgreSQL): also the advisory lock on the name's
	// permanent id, which instances of schema version 14 take.
	LocksAdvisoryID LockProtocolMode = "advisory+id"
	// LocksDual (PostgreSQL): also the row lock, which instances before
	// schema version 14 take.
	LocksDual LockProtocolMode = "dual"
	// LocksRow (MySQL family): an InnoDB row lock on the name's row.
	LocksRow LockProtocolMode = "row"
)

// LockProtocol reports how locks are taken. On PostgreSQL an upgraded
// database keeps taking the locks older instances take (LocksDual from
// before schema 14, LocksAdvisoryID from 14) until SetLockProtocol
// switches to LocksAdvisory; a fresh database starts there. MySQL/MariaDB:
// LocksRow, always.
func LockProtocol(ctx context.Context, db Base) (LockProtocolMode, error) {
	q := db.Dialect().Q.LockProtocolGet
	if q == "" {
		return LocksRow, nil
	}
	var rowLocks, idLocks bool
	if err := db.Executor().QueryRow(ctx, q).Scan(&rowLocks, &idLocks); err != nil {
		return "", fmt.Errorf("%w: %w", ErrLockProtocol, db.Dialect().Classify(err))
	}
	switch {
	case rowLocks:
		return LocksDual, nil
	case idLocks:
		return LocksAdvisoryID, nil
	}
	return LocksAdvisory, nil
}

// SetLockProtocol switches PostgreSQL's lock protocol. LocksAdvisory is
// safe only once every instance of the application runs a sqlcoord of
// schema version 15 or later: an older one takes only the row lock
// (before 14) or the id lock (14) and would not see the hash lock.
// LocksAdvisoryID and LocksDual go back (first giving every registered
// name a permanent id, which schema 14 instances need): start older
// instances only after this returns. Every instance reads the protocol
// at each lock, so the switch takes effect at once.
func SetLockProtocol(ctx context.Context, db Base, mode LockProtocolMode) error {
	q := db.Dialect().Q.LockProtocolSet
	if q == "" {
		if mode == LocksRow {
			return nil
		}
		return fmt.Errorf("%w: %s takes row locks only (InnoDB row locks write nothing)", ErrLockProtocol, db.Dialect().Name())
	}
	var rowLocks, idLocks bool
	switch mode {
	case LocksAdvisory:
	case LocksAdvisoryID:
		idLocks = true
	case LocksDual:
		rowLocks, idLocks = true, true
	default:
		return fmt.Errorf("%w: %q is not a PostgreSQL lock protocol (want %s, %s or %s)", ErrLockProtocol, mode, LocksAdvisory, LocksAdvisoryID, LocksDual)
	}
	n, err := db.Executor().Exec(ctx, q, rowLocks, idLocks)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLockProtocol, db.Dialect().Classify(err))
	}
	if n != 1 {
		return fmt.Errorf("%w: coord_lock_protocol has %d rows, want 1", ErrLockProtocol, n)
	}
	if idLocks {
		if _, err := db.Executor().Exec(ctx, db.Dialect().Q.LockAssignIDs); err != nil {
			return fmt.Errorf("%w: give lock names their ids: %w", ErrLockProtocol, db.Dialect().Classify(err))
		}
	}
	return nil
}

// lockProtocolVersion is the schema version of the current lock protocol
// (PostgreSQL: the hash lock, coord_lock_protocol.id_locks).
const lockProtocolVersion = 15

// Force records version as the applied schema version and clears the
// dirty flag, without running any migration — after a failed migration
// was repaired by hand (ErrDirty says which version failed). version must
// be 0 (nothing applied) or one of Versions(family).
func Force(ctx context.Context, db Base, version uint) error {
	all, err := Versions(db.Dialect().Family())
	if err != nil {
		return err
	}
	known := version == 0
	for _, v := range all {
		known = known || v == version
	}
	if !known {
		return fmt.Errorf("sqlcoord: force: %d is not a schema version (have %v)", version, all)
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
		return fmt.Errorf("sqlcoord: force: %w", db.Dialect().Classify(err))
	}
	return nil
}

// MigrationStatus reports the applied and pending versions.
func MigrationStatus(ctx context.Context, db Base) (Status, error) {
	all, err := Versions(db.Dialect().Family())
	if err != nil {
		return Status{}, err
	}
	st := Status{Latest: all[len(all)-1]}
	st.Version, st.Dirty, err = schemaVersion(ctx, db)
	if err != nil {
		return st, err
	}
	for _, v := range all {
		if v > st.Version {
			st.Pending = append(st.Pending, v)
		}
	}
	return st, nil
}

// CheckSchema returns nil when the schema is at the latest version and an
// error wrapping dialects.ErrNoSchema that says to run `sqlcoord migrate up`
// otherwise.
func CheckSchema(ctx context.Context, db Base) error {
	st, err := MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	if st.Dirty {
		return fmt.Errorf("%w at version %d", ErrDirty, st.Version)
	}
	if st.Version < st.Latest {
		return fmt.Errorf("%w (database at version %d, this sqlcoord needs %d)", dialects.ErrNoSchema, st.Version, st.Latest)
	}
	return nil
}

// schemaVersion reads coord_schema_migrations directly (golang-migrate
// would create the table as a side effect of merely looking).
func schemaVersion(ctx context.Context, db Base) (uint, bool, error) {
	var v int64
	var dirty bool
	err := db.Executor().QueryRow(ctx, "SELECT version, dirty FROM "+MigrationsTable).Scan(&v, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		cerr := db.Dialect().Classify(err)
		if errors.Is(cerr, dialects.ErrNoSchema) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("sqlcoord: read schema version: %w", cerr)
	}
	return uint(v), dirty, nil
}

// Versions lists the migration versions embedded for a family.
func Versions(family string) ([]uint, error) {
	fsys, err := sqlschema.FS(family)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	seen := map[uint]bool{}
	var out []uint
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil || seen[uint(v)] {
			continue
		}
		seen[uint(v)] = true
		out = append(out, uint(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) == 0 {
		return nil, fmt.Errorf("sqlcoord: no migrations embedded for %s", family)
	}
	return out, nil
}

// ErrMigrateNeedsDSN: Migrate was given a pool whose connection settings
// sqlcoord cannot read (an application's own MySQL/MariaDB *sql.DB).
var ErrMigrateNeedsDSN = errors.New("sqlcoord: migrating needs the DSN: use a *DB from Open, or `sqlcoord migrate up --dsn …`")

// migrationDB opens a dedicated *sql.DB for golang-migrate (which closes
// it): never the application's pool.
type migrationDBer interface {
	migrationDB(ctx context.Context) (*sql.DB, error)
}

func (db *DB) migrationDB(ctx context.Context) (*sql.DB, error) {
	if db.dsn == "" {
		return pgxConfigDB(ctx, db.DB.DB, db.dialect)
	}
	if db.dialect.Family() == "mysql" {
		cfg, err := mysql.ParseDSN(db.dsn)
		if err != nil {
			return nil, err
		}
		cfg.MultiStatements = true
		return sql.Open(db.Dialect().DriverName(), cfg.FormatDSN())
	}
	cfg, err := pgx.ParseConfig(db.dsn)
	if err != nil {
		return nil, err
	}
	return execModeDB(cfg), nil
}

func (s *SQLX) migrationDB(ctx context.Context) (*sql.DB, error) {
	return pgxConfigDB(ctx, s.X.DB, s.dialect)
}

func (p *Pgx) migrationDB(context.Context) (*sql.DB, error) {
	return execModeDB(p.Pool.Config().ConnConfig.Copy()), nil
}

// pgxConfigDB opens a new *sql.DB with the connection config of a pool
// built on pgx's stdlib driver.
func pgxConfigDB(ctx context.Context, pool *sql.DB, d *dialects.Dialect) (*sql.DB, error) {
	if d.Family() != "postgres" {
		return nil, ErrMigrateNeedsDSN
	}
	cfg, err := poolConnConfig(ctx, pool)
	if err != nil {
		return nil, errors.Join(ErrMigrateNeedsDSN, err)
	}
	return execModeDB(cfg), nil
}

// execModeDB opens a database/sql pool on cfg whose statements are never
// named prepared statements (they would break behind PgBouncer).
func execModeDB(cfg *pgx.ConnConfig) *sql.DB {
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	return stdlib.OpenDB(*cfg)
}

// migrator opens a dedicated connection pool (golang-migrate closes the
// pool it is given) and returns a golang-migrate instance on it.
func migrator(ctx context.Context, db Base) (*migrate.Migrate, error) {
	family := db.Dialect().Family()
	fsys, err := sqlschema.FS(family)
	if err != nil {
		return nil, err
	}
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return nil, err
	}
	mdb, ok := db.(migrationDBer)
	if !ok {
		return nil, ErrMigrateNeedsDSN
	}
	sdb, err := mdb.migrationDB(ctx)
	if err != nil {
		return nil, err
	}
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("%w to %s: %v", ErrUnreachable, db.String(), db.Dialect().Classify(err))
	}
	var drv database.Driver
	if family == "mysql" {
		drv, err = migratemysql.WithInstance(sdb, &migratemysql.Config{MigrationsTable: MigrationsTable})
	} else {
		drv, err = migratepgx.WithInstance(sdb, &migratepgx.Config{MigrationsTable: MigrationsTable})
	}
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("sqlcoord: migrate: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, family, drv)
	if err != nil {
		drv.Close()
		return nil, fmt.Errorf("sqlcoord: migrate: %w", err)
	}
	return m, nil
}
