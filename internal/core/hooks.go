package core

import (
	"context"
	"database/sql"
	"time"
)

// Hooks that a driver package fills in when imported, so that the root
// package's database/sql pool can use what only that driver offers
// without the root package importing the driver. pgxv5 sets both in its
// init.
var (
	// PgxExecMode is pgx.QueryExecModeExec: prepended to a statement's
	// arguments, pgx's stdlib driver runs it without a named prepared
	// statement (Options.Pooler on a database/sql pool). nil: pgxv5 not
	// imported.
	PgxExecMode any
	// PgxStdlibListen listens for PostgreSQL notifications on a
	// connection of its own, made from dsn ("" : from the configuration of
	// one of db's connections, which must be pgx's stdlib driver). nil:
	// pgxv5 not imported.
	PgxStdlibListen func(ctx context.Context, db *sql.DB, dsn, channel string, opt ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error
	// PgxParseConfig parses a PostgreSQL DSN as pgx will when it connects
	// (pgx.ParseConfig), so that a parameter that does not parse
	// (sslmode=disabel, connect_timeout=abc) is a bad DSN before anything
	// connects. nil: pgxv5 not imported (pgx's stdlib driver parses only
	// when it connects).
	PgxParseConfig func(dsn string) error
)

// ListenOptions mirrors sqlcoord.ListenOptions.
type ListenOptions struct {
	Probe        bool
	ProbeTimeout time.Duration
	ProbeOnly    bool
	Ready        func()
	Payload      func(string)
}

// IsPgxStdlib reports whether db runs on pgx's database/sql driver.
func IsPgxStdlib(db *sql.DB) bool {
	return db != nil && typeName(db.Driver()) == "*stdlib.Driver"
}
