package pgxv5_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/pgxv5"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The application's pgx pool, helpers taking its pgx.Tx.
func ExampleWrap() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	d, err := pgxv5.Wrap(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	locks := coord.New(d)
	err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx pgx.Tx) error {
		if err := locks.TryLock(ctx, tx, "invoice:42"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE invoices SET state = 'sent' WHERE id = 42`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
