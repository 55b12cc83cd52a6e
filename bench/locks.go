package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
)

// Locks measures acquire+release of sqlcoord's row lock, lease and fenced
// write beside the database's own advisory lock (PostgreSQL
// pg_advisory_xact_lock in a transaction; MySQL/MariaDB GET_LOCK +
// RELEASE_LOCK), with each client using its own name (uncontended: the
// cost of the primitive itself, not of waiting).
func Locks(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	c := coord.New(db)
	s := &suite{db: db, cfg: cfg, group: "locks"}
	pg := db.Dialect().Family() == "postgres"
	name := func(kind string, w int) string { return fmt.Sprintf("bench-%s-%d", kind, w) }
	// The cheapest durable write, for leases and fences: a single-row
	// upsert (what Acquire, Renew, Release and Fence each are at best).
	upsert := `INSERT INTO bench_upsert (k, v) VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET v = bench_upsert.v + 1`
	create := `CREATE TABLE IF NOT EXISTS bench_upsert (k text PRIMARY KEY, v bigint NOT NULL)`
	if !pg {
		upsert = `INSERT INTO bench_upsert (k, v) VALUES (?, 1) ON DUPLICATE KEY UPDATE v = v + 1`
		create = `CREATE TABLE IF NOT EXISTS bench_upsert (k VARCHAR(255) PRIMARY KEY, v BIGINT NOT NULL)`
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE bench_upsert`)
	for _, n := range cfg.Clients {
		db.SetMaxOpenConns(n + 4)
		s.run(ctx, "native advisory lock", "", n, func(ctx context.Context, w int) error {
			if pg {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, name("adv", w)); err != nil {
					tx.Rollback()
					return err
				}
				return tx.Commit()
			}
			conn, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			var ok int
			if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 5)`, name("adv", w)).Scan(&ok); err != nil || ok != 1 {
				return fmt.Errorf("GET_LOCK: %v %d", err, ok)
			}
			return conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, name("adv", w)).Scan(&ok)
		})
		s.run(ctx, "row lock (TryLock+commit)", "native advisory lock", n, func(ctx context.Context, w int) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := c.TryLock(ctx, tx, name("row", w)); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		})
		s.run(ctx, "two upserts (autocommit)", "", n, func(ctx context.Context, w int) error {
			if _, err := db.ExecContext(ctx, upsert, name("up", w)); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, upsert, name("up", w))
			return err
		})
		s.run(ctx, "lease (Acquire+Release)", "two upserts (autocommit)", n, func(ctx context.Context, w int) error {
			l, err := c.Acquire(ctx, name("lease", w), "", 10*time.Second)
			if err != nil {
				return err
			}
			return c.Release(ctx, l)
		})
		s.run(ctx, "upsert in a transaction", "", n, func(ctx context.Context, w int) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, upsert, name("up", w)); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		})
		tokens := make([]int64, n)
		s.run(ctx, "fenced write (Fence+commit)", "upsert in a transaction", n, func(ctx context.Context, w int) error {
			tokens[w]++
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := c.Fence(ctx, tx, name(fmt.Sprintf("fence-c%d", n), w), tokens[w]); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		})
	}
	return s.out, nil
}
