package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"net/http"
	"os"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/txn"
)

// An order service begins a transfer saga in the order's own transaction
// and drives it at once; drivers (Run) in every instance take over what
// Drive leaves — a retry, a crash.
func Example() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	c, err := saga.New(db, saga.Options{})
	if err != nil {
		log.Fatal(err)
	}
	go c.Run(ctx) // recovery: any number of instances

	var gid string
	err = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES (42, 30)`); err != nil {
			return err
		}
		gid, err = c.Begin(ctx, tx, saga.Global{GID: "order-42", Mode: saga.ModeSaga, Branches: []saga.Branch{
			{Name: "debit", Target: "https://accounts.internal/saga/debit", Payload: []byte(`{"account":7,"amount":30}`)},
			{Name: "credit", Target: "https://merchants.internal/saga/credit", Payload: []byte(`{"merchant":3,"amount":30}`)},
		}})
		return err
	})
	if errors.Is(err, sqlcoord.ErrDuplicate) {
		return // order-42 was begun before: a retried request
	}
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.Drive(ctx, gid) // Succeeded, Aborted, or still running (retries pending)
	log.Print(st, err)
}

// A participant serves its branch over HTTP: the barrier makes a
// repeated, late or out-of-order call harmless; saga.Fail refuses for a
// business reason (the coordinator compensates).
func ExampleHandler() {
	db, err := sqlcoord.Open(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/saga/debit", saga.Handler(txn.NewBarrier(db), func(ctx context.Context, tx *sql.Tx, c saga.Call) error {
		delta := -30 // parse c.Payload in a real service
		if c.Op == txn.OpCompensate {
			delta = 30
		}
		res, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = 7 AND balance + $1 >= 0`, delta)
		if err != nil {
			return err // retried
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return saga.Fail(errors.New("insufficient funds"))
		}
		return nil
	}))
	log.Fatal(http.ListenAndServe(":8081", nil))
}

// A branch in Go, registered by name on every driver, made exactly-once
// by the participant database's barrier.
func ExampleBarrierFunc() {
	ctx := context.Background()
	orders, _ := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	stock, _ := sqlcoord.Open(ctx, os.Getenv("STOCK_DATABASE_URL"))
	c, _ := saga.New(orders, saga.Options{})
	c.Register("reserve-stock", saga.BarrierFunc(txn.NewBarrier(stock), func(ctx context.Context, tx *sql.Tx, call saga.Call) error {
		switch call.Op {
		case txn.OpTry:
			_, err := tx.ExecContext(ctx, `UPDATE stock SET reserved = reserved + 1 WHERE sku = 'A-1'`)
			return err
		case txn.OpConfirm:
			_, err := tx.ExecContext(ctx, `UPDATE stock SET reserved = reserved - 1, sold = sold + 1 WHERE sku = 'A-1'`)
			return err
		default: // cancel
			_, err := tx.ExecContext(ctx, `UPDATE stock SET reserved = reserved - 1 WHERE sku = 'A-1'`)
			return err
		}
	}))
	c.Run(ctx)
}
