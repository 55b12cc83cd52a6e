// Package dialects is sqlcoord's dialect layer: everything sqlcoord knows
// about one database family, and the contract a dialect implements.
//
// A Dialect holds the text of every statement sqlcoord sends (Q, one
// Queries per family: postgres.go, mysql.go, mysql_epoch.go — read them to
// see exactly what runs on your database), the typed Operations built on
// them (counters, fences, epochs, the saga log), error classification
// into sqlcoord's sentinel errors (Error, ErrLocked, ErrSerialization, …)
// and what a server says about itself (ServerInfo). Executor, Row, Rows
// and OwnedTx are the statement interface every application stack
// (sqlcoord's *DB, pgxv5, sqlxdriver) provides to the helpers.
//
// The package imports no database driver: a driver's errors are told
// apart by their SQLSTATE or MySQL error number and by type name, so an
// application on pgx compiles no MySQL driver and one on MariaDB no pgx.
//
// It is public the way River's riverdriver is: so that you can read what
// sqlcoord does and add a dialect — Derive one from a built-in dialect with
// Operations of your own, Register it, and run the conformance suite
// (package sqlcoordtest) on it. It carries no compatibility
// promise — its details change with sqlcoord's schema and statements in
// minor releases. Applications use the root package, coord, txn, outbox
// and the other primitives; they need this package only to name an
// Executor (txn.Options.Verify) or to match an *Error with errors.As.
//
// The built-in dialects are Postgres, MariaDB, MySQL, Galera and
// GaleraSingleWriter; ByFamily picks one by name. They are tested on
// PostgreSQL 15 and MariaDB 10.11. MySQL 8's statements are written but
// untested: Debian ships no MySQL 8 server.
package dialects
