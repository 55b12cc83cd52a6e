package sqlxdriver_test

import (
	"context"
	"log"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sqlcoord/sqlcoord/sqlxdriver"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The application's *sqlx.DB; txn.Do hands the callback a *sqlx.Tx.
func ExampleWrap() {
	ctx := context.Background()
	x, err := sqlx.Open("mysql", "app:secret@tcp(db:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	d, err := sqlxdriver.Wrap(ctx, x)
	if err != nil {
		log.Fatal(err)
	}
	keys := txn.NewKeys(d, txn.KeysOptions{})
	err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx *sqlx.Tx) error {
		if _, err := tx.NamedExecContext(ctx, `INSERT INTO orders (id) VALUES (:id)`, map[string]any{"id": 7}); err != nil {
			return err
		}
		claim, err := keys.Record(ctx, tx, "orders", "req-7", nil, []byte(`{"id":7}`))
		if claim.Replay {
			return errAlreadyDone // roll back the duplicate's effect
		}
		return err
	})
	if err != nil && err != errAlreadyDone {
		log.Fatal(err)
	}
}

var errAlreadyDone = context.Canceled
