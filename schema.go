package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	sqlschema "github.com/sqlcoord/sqlcoord/sql"
)

// The schema: installing it is package migrate's (golang-migrate) or the
// CLI's; this package only reads its state, so that checking it pulls no
// migration tooling into an application.

// MigrationsTable is golang-migrate's bookkeeping table for sqlcoord's own
// schema; it is separate from an application's schema_migrations.
const MigrationsTable = "coord_schema_migrations"

// ErrDirty: a migration failed half-way. The error says at which
// version and what to run next (`sqlcoord migrate force`, after a repair
// by hand).
var ErrDirty = dialects.ErrDirty

// Status is the schema state of a database.
type Status struct {
	Version uint   `json:"version"` // applied version, 0 when none
	Dirty   bool   `json:"dirty"`   // a migration failed half-way
	Latest  uint   `json:"latest"`  // newest version this build of sqlcoord ships
	Pending []uint `json:"pending"` // versions not yet applied (never nil)
	// Ahead: the database is at a version newer than this build ships — a
	// newer release migrated it (a rolling deploy, or this build was
	// rolled back to). This build works on it (migrations only add within
	// a major version) but cannot migrate it: see ErrSchemaAhead.
	Ahead bool `json:"ahead"`
}

// ErrSchemaAhead: the database's schema is newer than this build of
// sqlcoord knows (Status.Ahead). Reading and writing through it work;
// migrating it does not — run the newer release's migrate, or roll the
// schema back with it. migrate.Migrate(…, Up) is a no-op then; Down and To
// refuse with this error.
var ErrSchemaAhead = errors.New("sqlcoord: the schema is newer than this release")

// SchemaAheadError says by how much (it matches ErrSchemaAhead).
type SchemaAheadError struct{ Version, Latest uint }

func (e *SchemaAheadError) Error() string {
	return fmt.Sprintf("sqlcoord: schema %d is newer than this release's %d: run the newer release's migrate, or roll the schema back with it (this release works on it meanwhile)", e.Version, e.Latest)
}

// Is makes errors.Is(err, ErrSchemaAhead) true.
func (e *SchemaAheadError) Is(target error) bool { return target == ErrSchemaAhead }

// MigrationStatus reports the applied and pending versions.
func MigrationStatus(ctx context.Context, db Base) (Status, error) {
	all, err := Versions(db.Dialect().Family())
	if err != nil {
		return Status{}, err
	}
	st := Status{Latest: all[len(all)-1], Pending: []uint{}}
	st.Version, st.Dirty, err = schemaVersion(ctx, db)
	if err != nil {
		return st, err
	}
	st.Ahead = st.Version > st.Latest
	for _, v := range all {
		if v > st.Version {
			st.Pending = append(st.Pending, v)
		}
	}
	return st, nil
}

// CheckSchema returns nil when the schema is at this release's latest
// version or newer (a newer release migrated it: this one works on it; see
// Status.Ahead), and an error wrapping ErrNoSchema that says to run
// `sqlcoord migrate up` when it is older or missing.
func CheckSchema(ctx context.Context, db Base) error {
	st, err := MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	if st.Dirty {
		return core.DirtyError(db.Dialect().Family(), st.Version, nil)
	}
	if st.Version == 0 {
		return errs.Errorf("%w: no coord_ tables", ErrNoSchema)
	}
	if st.Version < st.Latest {
		return errs.Errorf("%w: at version %d, this release needs %d", ErrNoSchema, st.Version, st.Latest)
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
		if errors.Is(cerr, ErrNoSchema) {
			return 0, false, nil
		}
		return 0, false, errs.Errorf("sqlcoord: read schema version: %w", cerr)
	}
	return uint(v), dirty, nil
}

// Versions lists the migration versions embedded for a family.
func Versions(family string) ([]uint, error) { return sqlschema.Versions(family) }

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
	q := db.Dialect().Q().LockProtocolGet
	if q == "" {
		return LocksRow, nil
	}
	var rowLocks, idLocks bool
	if err := db.Executor().QueryRow(ctx, q).Scan(&rowLocks, &idLocks); err != nil {
		return "", errs.Errorf("%w: %w", ErrLockProtocol, db.Dialect().Classify(err))
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
// instances only after this returns. Every session reads the protocol
// when a transaction starts (migration 22 folds it into the lock
// statement), so after switching back to an older protocol
// SetLockProtocol waits until the transactions open in other sessions of
// this database at that moment have ended: when it returns, every lock
// taken from then on follows the new protocol. (Switching to
// LocksAdvisory needs no wait: a transaction still on the older protocol
// only takes more locks.) A
// session idle in a transaction delays it; cancel ctx to stop waiting
// (the switch itself is done; an ErrLockProtocol-wrapped context error
// says it was not confirmed).
func SetLockProtocol(ctx context.Context, db Base, mode LockProtocolMode) error {
	q := db.Dialect().Q().LockProtocolSet
	if q == "" {
		if mode == LocksRow {
			return nil
		}
		return errs.Errorf("%w: %s takes row locks only (InnoDB row locks write nothing)", ErrLockProtocol, db.Dialect().Name())
	}
	var rowLocks, idLocks bool
	switch mode {
	case LocksAdvisory:
	case LocksAdvisoryID:
		idLocks = true
	case LocksDual:
		rowLocks, idLocks = true, true
	default:
		return errs.Errorf("%w: %q is not a PostgreSQL lock protocol (want %s, %s or %s)", ErrLockProtocol, mode, LocksAdvisory, LocksAdvisoryID, LocksDual)
	}
	n, err := db.Executor().Exec(ctx, q, rowLocks, idLocks)
	if err != nil {
		return errs.Errorf("%w: %w", ErrLockProtocol, db.Dialect().Classify(err))
	}
	if n != 1 {
		return errs.Errorf("%w: coord_lock_protocol has %d rows, want 1", ErrLockProtocol, n)
	}
	if idLocks {
		if _, err := db.Executor().Exec(ctx, db.Dialect().Q().LockAssignIDs); err != nil {
			return errs.Errorf("%w: give lock names their ids: %w", ErrLockProtocol, db.Dialect().Classify(err))
		}
	}
	if !idLocks {
		return nil // transactions still on the older protocol only take more locks
	}
	return waitOpenTransactions(ctx, db)
}

// waitOpenTransactions waits until the transactions open in other
// sessions now have ended (see SetLockProtocol).
func waitOpenTransactions(ctx context.Context, db Base) error {
	q := db.Dialect().Q()
	var open string
	if err := db.Executor().QueryRow(ctx, q.LockProtocolOpen).Scan(&open); err != nil {
		return errs.Errorf("%w: list open transactions: %w", ErrLockProtocol, db.Dialect().Classify(err))
	}
	for open != "" {
		var n int64
		if err := db.Executor().QueryRow(ctx, q.LockProtocolStillOpen, open).Scan(&n); err != nil {
			return errs.Errorf("%w: wait for open transactions: %w", ErrLockProtocol, db.Dialect().Classify(err))
		}
		if n == 0 {
			return nil
		}
		if err := backoff.Sleep(ctx, 20*time.Millisecond); err != nil {
			return errs.Errorf("%w: switched, but %d transaction(s) open before the switch are still open: %w", ErrLockProtocol, n, err)
		}
	}
	return nil
}

// LockProtocolVersion is the schema version of the current lock protocol
// (PostgreSQL: the hash lock, coord_lock_protocol.id_locks).
const LockProtocolVersion = 15
