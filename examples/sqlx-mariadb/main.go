// Command sqlx-mariadb is an order service on sqlx and MariaDB, with the
// application's own *sqlx.DB (its DSN has parseTime=true and no
// clientFoundRows). Helpers run in the service's own *sqlx.Tx, so its
// NamedExec and Rebind keep working inside txn.Do.
//
//	go run ./examples/sqlx-mariadb -dsn 'app:pw@tcp(db:3306)/shop?parseTime=true'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/sqlxdriver"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("SQLCOORD_DSN"), "go-sql-driver DSN with parseTime=true")
	flag.Parse()
	if err := run(context.Background(), *dsn, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

type order struct {
	ID    string `db:"id"`
	Item  string `db:"item"`
	Fence int64  `db:"fence"`
}

func run(ctx context.Context, dsn string, out io.Writer) error {
	// The schema is installed once, e.g. by `sqlcoord migrate up` in the
	// deploy; here through a pool sqlcoord opens from the DSN.
	mig, err := sqlcoord.Open(ctx, dsn)
	if err != nil {
		return err
	}
	err = migrate.Migrate(ctx, mig, migrate.Up)
	mig.Close()
	if err != nil {
		return err
	}

	x, err := sqlx.Open("mysql", dsn) // the application's own pool
	if err != nil {
		return err
	}
	defer x.Close()
	db, err := sqlxdriver.Wrap(ctx, x)
	if err != nil {
		return err
	}
	if _, err := x.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id VARCHAR(40) PRIMARY KEY, item VARCHAR(40) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	c := coord.New(db)
	keys := txn.NewKeys(db, txn.KeysOptions{})
	ob := outbox.New(db)
	lease, err := c.Acquire(ctx, "order-book-writer", "", 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Release(context.WithoutCancel(ctx), lease)

	place := func(requestID, item string) (string, error) {
		var resp string
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sqlx.Tx) error {
			claim, err := keys.Begin(ctx, tx, "orders", requestID, txn.Fingerprint([]byte(item)))
			if err != nil || claim.Replay {
				resp = string(claim.Response)
				return err
			}
			if err := c.TryLock(ctx, tx, "stock:"+item); err != nil {
				return err
			}
			if err := c.Fence(ctx, tx, "order-book", lease.Token); err != nil {
				return err
			}
			if _, err := tx.NamedExecContext(ctx, `INSERT INTO orders (id, item, fence) VALUES (:id, :item, :fence)`,
				order{ID: requestID, Item: item, Fence: lease.Token}); err != nil {
				return err
			}
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "orders.created", Key: requestID, Payload: []byte(item)}); err != nil {
				return err
			}
			resp = "order " + requestID + " placed"
			return keys.Complete(ctx, tx, "orders", requestID, []byte(resp))
		})
		return resp, err
	}
	for _, req := range []string{"req-1", "req-1", "req-2"} { // req-1 is retried by the client
		resp, err := place(req, "book")
		if err != nil {
			return err
		}
		fmt.Fprintln(out, resp)
	}
	var orders []order
	if err := x.SelectContext(ctx, &orders, `SELECT id, item, fence FROM orders ORDER BY id`); err != nil {
		return err
	}
	st, err := ob.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orders %d, outbox pending %d\n", len(orders), st.Pending)
	if len(orders) != 2 || st.Pending != 2 {
		return errors.New("expected 2 orders and 2 messages")
	}
	return nil
}
