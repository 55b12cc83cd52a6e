package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Idempotency measures an idempotency key with the business insert in one
// transaction, every request with a fresh key: the bare insert (no key),
// a hand-written key (the insert, then INSERT … ON CONFLICT DO NOTHING /
// INSERT IGNORE of key and response), and beside that hand-written key
// Begin+insert+Complete (two-phase) and insert+Record (write-once).
// Begin+insert+Complete is also set beside the hand-written SQL with its
// guarantee (a duplicate waits or sees the key before doing anything):
// the key first, the insert, then the response — five statements, like
// Begin's.
func Idempotency(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_orders`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_orders (id BIGINT PRIMARY KEY, body VARCHAR(100) NOT NULL)`); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE bench_orders`)
	// The hand-written pattern: the effect, then the key and its response
	// in one INSERT that does nothing on a duplicate.
	db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_keys`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_keys (scope VARCHAR(255) NOT NULL, idem_key VARCHAR(255) NOT NULL, response VARCHAR(100) NOT NULL, PRIMARY KEY (scope, idem_key))`); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE bench_keys`)
	handKey := `INSERT INTO bench_keys (scope, idem_key, response) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	if db.Dialect().Family() != "postgres" {
		handKey = `INSERT IGNORE INTO bench_keys (scope, idem_key, response) VALUES (?, ?, ?)`
	}
	// The hand-written pattern with Begin's guarantee (a duplicate waits for
	// the first request, or sees its key, before doing anything): the key
	// first, unique-indexed, then the effect, then the response.
	handPending := `INSERT INTO bench_keys (scope, idem_key, response) VALUES ($1, $2, '') ON CONFLICT DO NOTHING`
	handDone := `UPDATE bench_keys SET response = $1 WHERE scope = $2 AND idem_key = $3`
	if db.Dialect().Family() != "postgres" {
		handPending = `INSERT IGNORE INTO bench_keys (scope, idem_key, response) VALUES (?, ?, '')`
		handDone = `UPDATE bench_keys SET response = ? WHERE scope = ? AND idem_key = ?`
	}
	ins := fmt.Sprintf(`INSERT INTO bench_orders (id, body) VALUES (%s, %s)`, db.Dialect().Placeholder(1), db.Dialect().Placeholder(2))
	keys := txn.NewKeys(db, txn.KeysOptions{})
	var seq atomic.Int64
	// a scope of this run's own: keys of an earlier round or run are not
	// replayed as if they were work
	scope := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	s := &suite{db: db, cfg: cfg, group: "idempotency"}
	const handTwoPhase = "hand-written key first (INSERT … ON CONFLICT DO NOTHING, insert, UPDATE response): Begin's guarantee"
	fp := txn.Fingerprint([]byte("bench"))
	clients := []int{1, 32}
	for _, n := range clients {
		poolSize(db, n+4)
		var cases caseList
		cases.add("bare insert", "", func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, ins, seq.Add(1), "order")
				return err
			})
		})
		cases.add("hand-written key (insert + INSERT … ON CONFLICT DO NOTHING)", "", func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				id := seq.Add(1)
				if _, err := tx.ExecContext(ctx, ins, id, "order"); err != nil {
					return err
				}
				n, err := tx.ExecContext(ctx, handKey, scope, fmt.Sprintf("req-%d", id), "ok")
				if err != nil {
					return err
				}
				if k, _ := n.RowsAffected(); k != 1 {
					return fmt.Errorf("duplicate key")
				}
				return nil
			})
		})
		cases.add(handTwoPhase, "", func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				id := seq.Add(1)
				key := fmt.Sprintf("req-%d", id)
				n, err := tx.ExecContext(ctx, handPending, scope, key)
				if err != nil {
					return err
				}
				if k, _ := n.RowsAffected(); k != 1 {
					return fmt.Errorf("duplicate key")
				}
				if _, err := tx.ExecContext(ctx, ins, id, "order"); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, handDone, "ok", scope, key)
				return err
			})
		})
		cases.add("Begin+insert+Complete (two-phase)", "hand-written key (insert + INSERT … ON CONFLICT DO NOTHING)", func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				id := seq.Add(1)
				key := fmt.Sprintf("req-%d", id)
				c, err := keys.Begin(ctx, tx, scope, key, fp)
				if err == nil && c.Replay {
					err = fmt.Errorf("replayed a fresh key")
				}
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, ins, id, "order"); err != nil {
					return err
				}
				return keys.Complete(ctx, tx, scope, key, []byte("ok"))
			})
		})
		cases.add("insert+Record (write-once)", "hand-written key (insert + INSERT … ON CONFLICT DO NOTHING)", func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				id := seq.Add(1)
				if _, err := tx.ExecContext(ctx, ins, id, "order"); err != nil {
					return err
				}
				c, err := keys.Record(ctx, tx, scope, fmt.Sprintf("req-%d", id), fp, []byte("ok"))
				if err == nil && c.Replay {
					err = fmt.Errorf("replayed a fresh key")
				}
				return err
			})
		})
		s.interleaved(ctx, n, cases)
		s.compare("Begin+insert+Complete (two-phase)", handTwoPhase, n)
	}
	return s.out, nil
}
