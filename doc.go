// Package sqlcoord gives applications already running on PostgreSQL or
// MySQL/MariaDB the coordination primitives of distributed systems —
// locks (coord), leases with fencing tokens (coord), ids (coord/ids),
// exactly-once job runs (coord/jobs), idempotency keys, transaction
// helpers and a TCC/saga barrier (txn), sessions (session), membership
// (membership) and a transactional outbox (outbox) — with every guarantee
// enforced by the database, in SQL.
//
// This package is the common ground: the Driver interface that those
// packages take (one implementation per application stack), the error
// vocabulary (ErrLocked, ErrLockTimeout, … matched with errors.Is), the
// failover epochs, and the database/sql stack:
//
//   - database/sql: Open(ctx, dsn) or WrapDB(ctx, db) → *DB, whose
//     transactions are *sql.Tx. Import the database/sql driver yourself
//     (github.com/jackc/pgx/v5/stdlib or github.com/go-sql-driver/mysql).
//   - pgx: package pgxv5 (Open, Wrap a *pgxpool.Pool) → pgx.Tx.
//   - sqlx: package sqlxdriver (Wrap a *sqlx.DB) → *sqlx.Tx.
//
// Installing the schema is package migrate's (golang-migrate) or the CLI's
// (`sqlcoord migrate up`); this package only checks it (CheckSchema).
//
// Tested on PostgreSQL 15 and MariaDB 10.11. MySQL 8 statements are
// written but have never run here: Debian ships no MySQL 8 server, so
// treat MySQL 8 as untested.
package sqlcoord
