// Command pgxpool is an order service on the most common Go + PostgreSQL
// stack: a *pgxpool.Pool, pgx.Tx everywhere, no database/sql. sqlcoord
// wraps the pool it already has; every helper runs in the service's own
// pgx.Tx.
//
//	go run ./examples/pgxpool -dsn postgres://…
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/pgxv5"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("SQLCOORD_DSN"), "postgres:// DSN")
	flag.Parse()
	if err := run(context.Background(), *dsn, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dsn string, out *os.File) error {
	pool, err := pgxpool.New(ctx, dsn) // the application's own pool
	if err != nil {
		return err
	}
	defer pool.Close()
	db, err := pgxv5.Wrap(ctx, pool)
	if err != nil {
		return err
	}
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, item text NOT NULL, fence bigint NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	c := coord.New(db)
	keys := txn.NewKeys(db, txn.KeysOptions{})
	ob := outbox.New(db)

	// A lease names the one writer of the order book; its token fences
	// every write, so a paused former writer cannot overwrite.
	lease, err := c.Acquire(ctx, "order-book-writer", "", 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Release(context.WithoutCancel(ctx), lease)

	place := func(requestID, item string) (string, error) {
		var resp string
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx pgx.Tx) error {
			claim, err := keys.Begin(ctx, tx, "orders", requestID, txn.Fingerprint([]byte(item)))
			if err != nil || claim.Replay {
				resp = string(claim.Response)
				return err
			}
			if err := c.TryLock(ctx, tx, "stock:"+item); err != nil { // held until commit
				return err
			}
			if err := c.Fence(ctx, tx, "order-book", lease.Token); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO orders (id, item, fence) VALUES ($1, $2, $3)`, requestID, item, lease.Token); err != nil {
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
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
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
