package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Idempotency measures the overhead of an idempotency key (Begin + the
// business insert + Complete, one transaction) against the bare business
// insert in a transaction, every request with a fresh key.
func Idempotency(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_orders`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_orders (id BIGINT PRIMARY KEY, body VARCHAR(100) NOT NULL)`); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE bench_orders`)
	ins := fmt.Sprintf(`INSERT INTO bench_orders (id, body) VALUES (%s, %s)`, db.Dialect().Placeholder(1), db.Dialect().Placeholder(2))
	keys := txn.NewKeys(db, txn.KeysOptions{})
	var seq atomic.Int64
	s := &suite{db: db, cfg: cfg, group: "idempotency"}
	fp := txn.Fingerprint([]byte("bench"))
	clients := []int{1, 32}
	for _, n := range clients {
		db.SetMaxOpenConns(n + 4)
		s.run(ctx, "bare insert", "", n, func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, ins, seq.Add(1), "order")
				return err
			})
		})
		s.run(ctx, "Begin+insert+Complete", "bare insert", n, func(ctx context.Context, w int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				id := seq.Add(1)
				key := fmt.Sprintf("req-%d", id)
				c, err := keys.Begin(ctx, tx, "bench", key, fp)
				if err != nil || c.Replay {
					return err
				}
				if _, err := tx.ExecContext(ctx, ins, id, "order"); err != nil {
					return err
				}
				return keys.Complete(ctx, tx, "bench", key, []byte("ok"))
			})
		})
	}
	return s.out, nil
}
