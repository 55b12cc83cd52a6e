// Command databasesql is an order service on plain database/sql with the
// application's own *sql.DB — PostgreSQL through pgx's stdlib driver, or
// MySQL/MariaDB through go-sql-driver. Helpers run in the service's own
// *sql.Tx.
//
//	go run ./examples/databasesql -driver pgx -dsn postgres://…
//	go run ./examples/databasesql -driver mysql -dsn 'app:pw@tcp(db:3306)/shop?parseTime=true'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	driver := flag.String("driver", "pgx", "database/sql driver: pgx or mysql")
	dsn := flag.String("dsn", os.Getenv("SQLCOORD_DSN"), "the driver's DSN")
	flag.Parse()
	if err := run(context.Background(), *driver, *dsn, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, driver, dsn string, out io.Writer) error {
	raw, err := sql.Open(driver, dsn) // the application's own pool
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(4)
	db, err := sqlcoord.WrapDB(ctx, raw)
	if err != nil {
		return err
	}
	if err := sqlcoord.CheckSchema(ctx, db); err != nil {
		return err // `sqlcoord migrate up --dsn …` installs it
	}
	ph := db.Dialect().Placeholder
	if _, err := raw.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id VARCHAR(40) PRIMARY KEY, item VARCHAR(40) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`); err != nil {
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
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
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
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, item, fence) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, requestID, item, lease.Token); err != nil {
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
	var orders int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		return err
	}
	st, err := ob.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orders %d, outbox pending %d\n", orders, st.Pending)
	if orders != 2 || st.Pending != 2 {
		return errors.New("expected 2 orders and 2 messages")
	}
	return nil
}
