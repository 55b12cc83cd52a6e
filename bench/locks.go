package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
)

// Locks measures sqlcoord's lock, lease and fenced write beside the same
// work done by hand, each client using its own name (uncontended: the cost
// of the primitive itself, not of waiting): TryLock+commit beside the
// database's advisory lock around an empty transaction (PostgreSQL
// pg_advisory_xact_lock in it; MySQL/MariaDB GET_LOCK before it and
// RELEASE_LOCK after it); Acquire+Release beside a hand-written lease (an
// upsert that takes a free or expired row and bumps its token, an UPDATE
// that ends it); Fence+commit beside one upsert in a transaction.
func Locks(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	c := coord.New(db)
	s := &suite{db: db, cfg: cfg, group: "locks"}
	pg := db.Dialect().Family() == "postgres"
	name := func(kind string, w int) string { return fmt.Sprintf("bench-%s-%d", kind, w) }
	// The cheapest durable write, for fences: a single-row upsert.
	upsert := `INSERT INTO bench_upsert (k, v) VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET v = bench_upsert.v + 1`
	create := `CREATE TABLE IF NOT EXISTS bench_upsert (k text PRIMARY KEY, v bigint NOT NULL)`
	// A hand-written lease with the same guarantee as Acquire+Release
	// (equal work): one upsert that takes the row when it is free or
	// expired and bumps the token, then one UPDATE that ends it; both
	// autocommit, by the database's clock.
	handAcquire := `INSERT INTO bench_lease AS l (k, owner, token, expires_at) VALUES ($1, $2, 1, clock_timestamp() + interval '10 seconds')
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= clock_timestamp() RETURNING token`
	handRelease := `UPDATE bench_lease SET expires_at = clock_timestamp() WHERE k = $1 AND owner = $2 AND token = $3`
	createLease := `CREATE TABLE IF NOT EXISTS bench_lease (k text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL)`
	if !pg {
		upsert = `INSERT INTO bench_upsert (k, v) VALUES (?, 1) ON DUPLICATE KEY UPDATE v = v + 1`
		create = `CREATE TABLE IF NOT EXISTS bench_upsert (k VARCHAR(255) PRIMARY KEY, v BIGINT NOT NULL)`
		// MariaDB: RETURNING on an upsert returns the row as written.
		handAcquire = `INSERT INTO bench_lease (k, owner, token, expires_at) VALUES (?, ?, 1, UTC_TIMESTAMP(6) + INTERVAL 10 SECOND)
ON DUPLICATE KEY UPDATE
  token = IF(expires_at <= UTC_TIMESTAMP(6), token + 1, token),
  owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
  expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING token`
		handRelease = `UPDATE bench_lease SET expires_at = UTC_TIMESTAMP(6) WHERE k = ? AND owner = ? AND token = ?`
		createLease = `CREATE TABLE IF NOT EXISTS bench_lease (k VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) NOT NULL, token BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL)`
	}
	for _, q := range []string{create, createLease} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE bench_upsert`)
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE bench_lease`)
	// The same two baselines with the guarantee sqlcoord adds:
	// no token at or below the failover epoch's base, so that a restored
	// disk snapshot, a promotion or a restart never hands a token out
	// twice — through dialects.Dialect.EpochBase, the expression
	// sqlcoord's own statements use.
	d := db.Dialect()
	if _, err := d.EpochCheck(ctx, db.Executor(), 0); err != nil { // MySQL family: records this run's epoch
		return nil, err
	}
	var base int64
	if err := db.QueryRowContext(ctx, `SELECT `+d.EpochBase("0")).Scan(&base); err != nil {
		return nil, fmt.Errorf("bench: epoch base: %w", err)
	}
	upsertEpoch := `INSERT INTO bench_upsert AS u (k, v) SELECT $1, 1 WHERE ` + d.EpochBase("0") + ` < $2
ON CONFLICT (k) DO UPDATE SET v = u.v + 1`
	handAcquireEpoch := `INSERT INTO bench_lease AS l (k, owner, token, expires_at)
SELECT $1, $2, e.b + 1, clock_timestamp() + interval '10 seconds' FROM (SELECT ` + d.EpochBase("0") + ` AS b) e
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, token = GREATEST(l.token + 1, EXCLUDED.token), expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= clock_timestamp() RETURNING token`
	// A lost release only makes the next holder wait out the TTL: it
	// need not wait for its flush (sqlcoord's Release does the same).
	handReleaseAsync := `UPDATE bench_lease SET expires_at = clock_timestamp() WHERE k = $1 AND owner = $2 AND token = $3
RETURNING set_config('synchronous_commit', 'off', true)`
	if !pg {
		upsertEpoch = `INSERT INTO bench_upsert (k, v) SELECT ?, 1 FROM DUAL WHERE ` + d.EpochBase("0") + ` < ?
ON DUPLICATE KEY UPDATE v = v + 1`
		handAcquireEpoch = `INSERT INTO bench_lease (k, owner, token, expires_at)
SELECT ?, ?, e.b + 1, UTC_TIMESTAMP(6) + INTERVAL 10 SECOND FROM (SELECT ` + d.EpochBase("0") + ` AS b) e
ON DUPLICATE KEY UPDATE
  token = IF(expires_at <= UTC_TIMESTAMP(6), GREATEST(token + 1, VALUES(token)), token),
  owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
  expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING token`
		handReleaseAsync = handRelease // InnoDB has no per-transaction flush setting
	}
	nativeLock := "native advisory lock (pg_advisory_xact_lock in a transaction)"
	if !pg {
		nativeLock = "native advisory lock (GET_LOCK, transaction, RELEASE_LOCK)"
	}
	const (
		sameLease  = "hand-written lease, epoch-checked (same restore guarantee; release not flushed)"
		sameUpsert = "upsert in a transaction, epoch-checked (same restore guarantee)"
	)
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano()) // this round's: owner of the hand-written leases, part of fence names
	for _, n := range cfg.Clients {
		poolSize(db, n+4)
		var cases caseList
		cases.add(nativeLock, "", func(ctx context.Context, w int) error {
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
			// GET_LOCK is the session's, not the transaction's: taken
			// before the transaction it protects, released after it.
			conn, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			var ok int
			if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 5)`, name("adv", w)).Scan(&ok); err != nil || ok != 1 {
				return fmt.Errorf("GET_LOCK: %v %d", err, ok)
			}
			tx, err := conn.BeginTx(ctx, nil)
			if err == nil {
				err = tx.Commit()
			}
			if rerr := conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, name("adv", w)).Scan(&ok); err == nil {
				err = rerr
			}
			return err
		})
		cases.add("row lock (TryLock+commit)", nativeLock, func(ctx context.Context, w int) error {
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
		cases.add("hand-written lease (upsert+update, autocommit)", "", func(ctx context.Context, w int) error {
			var token int64
			if err := db.QueryRowContext(ctx, handAcquire, name("hand", w), run).Scan(&token); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, handRelease, name("hand", w), run, token)
			return err
		})
		cases.add(sameLease, "", func(ctx context.Context, w int) error {
			var token int64
			if err := db.QueryRowContext(ctx, handAcquireEpoch, name("hand-epoch", w), run).Scan(&token); err != nil {
				return err
			}
			if token <= base {
				return fmt.Errorf("bench: token %d at or below the epoch base %d", token, base)
			}
			rows, err := db.QueryContext(ctx, handReleaseAsync, name("hand-epoch", w), run, token)
			if err != nil {
				return err
			}
			return rows.Close()
		})
		cases.add("lease (Acquire+Release)", "hand-written lease (upsert+update, autocommit)", func(ctx context.Context, w int) error {
			l, err := c.Acquire(ctx, name("lease", w), "", 10*time.Second)
			if err != nil {
				return err
			}
			return c.Release(ctx, l)
		})
		cases.add("upsert in a transaction", "", func(ctx context.Context, w int) error {
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
		cases.add(sameUpsert, "", func(ctx context.Context, w int) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, upsertEpoch, name("up-epoch", w), base+1)
			if err == nil {
				if k, _ := res.RowsAffected(); k == 0 {
					err = fmt.Errorf("bench: the epoch check refused token %d (base %d)", base+1, base)
				}
			}
			if err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		})
		tokens := make([]int64, n)
		cases.add("fenced write (Fence+commit)", "upsert in a transaction", func(ctx context.Context, w int) error {
			tokens[w]++
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := c.Fence(ctx, tx, name(fmt.Sprintf("fence-c%d-%s", n, run), w), base+tokens[w]); err != nil { // above the epoch's base
				tx.Rollback()
				return err
			}
			return tx.Commit()
		})
		s.interleaved(ctx, n, cases)
		s.compare("lease (Acquire+Release)", sameLease, n)
		s.compare("fenced write (Fence+commit)", sameUpsert, n)
	}
	return s.out, nil
}
