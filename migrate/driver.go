package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
)

// conn is golang-migrate's database.Driver on one dedicated connection,
// for either dialect, through database/sql only: golang-migrate's own
// pgx and mysql drivers import both database drivers' packages, which
// would make every application compile the other dialect's driver. The
// bookkeeping table and the lock are the ones those drivers use
// (coord_schema_migrations with version and dirty; pg_advisory_lock or
// GET_LOCK on golang-migrate's lock id), so a migrator of an older
// sqlcoord and this one exclude each other.
type conn struct {
	c      *sql.Conn
	family string
	pre    []any // statement options prepended to arguments (pgx exec mode)
	lockID string
	table  string // quoted
	locked atomic.Bool
	done   func() // closes the connection (and its pool, if dedicated)
}

var _ database.Driver = (*conn)(nil)

// openConn takes c (a dedicated connection) for golang-migrate and makes
// sure the bookkeeping table exists.
func openConn(ctx context.Context, c *sql.Conn, d *dialects.Dialect, pre []any, done func()) (*conn, error) {
	m := &conn{c: c, family: d.Family(), pre: pre, done: done}
	var dbName, schema string
	q := `SELECT current_database(), current_schema()`
	if m.family == "mysql" {
		q = `SELECT DATABASE(), ''`
	}
	if err := c.QueryRowContext(ctx, q, pre...).Scan(&dbName, &schema); err != nil {
		return nil, err
	}
	table, err := d.QuoteIdent(sqlcoord.MigrationsTable)
	if err != nil {
		return nil, err
	}
	m.table = table
	if m.family == "mysql" {
		m.lockID, _ = database.GenerateAdvisoryLockId(dbName + ":" + sqlcoord.MigrationsTable)
	} else {
		m.lockID, _ = database.GenerateAdvisoryLockId(dbName, schema, sqlcoord.MigrationsTable)
	}
	if err := m.Lock(); err != nil {
		return nil, err
	}
	defer m.Unlock()
	var n int
	q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '` + sqlcoord.MigrationsTable + `'`
	if m.family == "mysql" {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '` + sqlcoord.MigrationsTable + `'`
	}
	if err := c.QueryRowContext(ctx, q, pre...).Scan(&n); err != nil {
		return nil, &database.Error{OrigErr: err, Query: []byte(q)}
	}
	if n == 0 {
		q = `CREATE TABLE IF NOT EXISTS ` + m.table + ` (version bigint not null primary key, dirty boolean not null)`
		if _, err := c.ExecContext(ctx, q, pre...); err != nil {
			return nil, &database.Error{OrigErr: err, Query: []byte(q)}
		}
	}
	return m, nil
}

func (m *conn) Open(string) (database.Driver, error) {
	return nil, errors.New("sqlcoord: migrate: the driver is made from a pool, not a URL")
}

func (m *conn) Close() error { m.done(); return nil }

func (m *conn) Lock() error {
	return database.CasRestoreOnErr(&m.locked, false, true, database.ErrLocked, func() error {
		if m.family == "mysql" {
			var ok sql.NullBool
			q := `SELECT GET_LOCK(?, 10)`
			if err := m.c.QueryRowContext(context.Background(), q, m.lockID).Scan(&ok); err != nil {
				return &database.Error{OrigErr: err, Err: "try lock failed", Query: []byte(q)}
			}
			if !ok.Bool {
				return database.ErrLocked
			}
			return nil
		}
		q := `SELECT pg_advisory_lock(` + m.lockID + `)` // a number golang-migrate computed
		if _, err := m.c.ExecContext(context.Background(), q, m.pre...); err != nil {
			return &database.Error{OrigErr: err, Err: "try lock failed", Query: []byte(q)}
		}
		return nil
	})
}

func (m *conn) Unlock() error {
	return database.CasRestoreOnErr(&m.locked, true, false, database.ErrNotLocked, func() error {
		q := `SELECT pg_advisory_unlock(` + m.lockID + `)`
		args := m.pre
		if m.family == "mysql" {
			q, args = `SELECT RELEASE_LOCK(?)`, []any{m.lockID}
		}
		if _, err := m.c.ExecContext(context.Background(), q, args...); err != nil {
			return &database.Error{OrigErr: err, Query: []byte(q)}
		}
		return nil
	})
}

// Run executes one migration file: one round trip, several statements
// (pgx's simple protocol; MySQL with multiStatements).
func (m *conn) Run(migration io.Reader) error {
	text, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(text)) == "" {
		return nil
	}
	if _, err := m.c.ExecContext(context.Background(), string(text)); err != nil {
		return database.Error{OrigErr: err, Err: "migration failed", Query: text, Line: errorLine(string(text), err)}
	}
	return nil
}

// errorLine is the line of text where PostgreSQL located err, or 0.
func errorLine(text string, err error) uint {
	pos := dialects.ErrorPosition(err)
	if pos <= 0 || pos > len([]rune(text)) {
		return 0
	}
	return uint(strings.Count(string([]rune(text)[:pos-1]), "\n") + 1)
}

func (m *conn) SetVersion(version int, dirty bool) error {
	tx, err := m.c.BeginTx(context.Background(), nil)
	if err != nil {
		return &database.Error{OrigErr: err, Err: "transaction start failed"}
	}
	defer tx.Rollback()
	q := `DELETE FROM ` + m.table
	if _, err := tx.Exec(q, m.pre...); err != nil {
		return &database.Error{OrigErr: err, Query: []byte(q)}
	}
	if version >= 0 || (version == database.NilVersion && dirty) {
		q = fmt.Sprintf(`INSERT INTO %s (version, dirty) VALUES (%d, %t)`, m.table, version, dirty)
		if _, err := tx.Exec(q, m.pre...); err != nil {
			return &database.Error{OrigErr: err, Query: []byte(q)}
		}
	}
	if err := tx.Commit(); err != nil {
		return &database.Error{OrigErr: err, Err: "transaction commit failed"}
	}
	return nil
}

func (m *conn) Version() (int, bool, error) {
	var v int64
	var dirty bool
	q := `SELECT version, dirty FROM ` + m.table + ` LIMIT 1`
	err := m.c.QueryRowContext(context.Background(), q, m.pre...).Scan(&v, &dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return database.NilVersion, false, nil
	case err != nil:
		return 0, false, &database.Error{OrigErr: err, Query: []byte(q)}
	}
	return int(v), dirty, nil
}

// Drop is not offered: sqlcoord's tables live beside the application's.
func (m *conn) Drop() error {
	return errors.New("sqlcoord: migrate: drop is not supported (migrate down removes sqlcoord's tables)")
}

// pgxExecMode is the statement option of pgx's stdlib driver that keeps
// a statement from being prepared (PgBouncer), when pgxv5 is imported.
func pgxExecMode(family string) []any {
	if family == "postgres" && core.PgxExecMode != nil {
		return []any{core.PgxExecMode}
	}
	return nil
}

// withMultiStatements is a go-sql-driver/mysql DSN that allows several
// statements in one Exec (a migration file).
func withMultiStatements(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "multiStatements=true"
}
