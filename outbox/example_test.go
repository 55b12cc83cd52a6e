package outbox_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

func open() *sqlcoord.DB {
	db, err := sqlcoord.Open(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A message exists because its business transaction committed.
func ExampleOutbox_Enqueue() {
	ctx := context.Background()
	db := open()
	ob := outbox.New(db)
	err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (7)`); err != nil {
			return err
		}
		msg, err := outbox.JSON("orders.created", "order-7", map[string]int{"id": 7})
		if err != nil {
			return err
		}
		return ob.Enqueue(ctx, tx, msg)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The relay publishes committed messages at least once; run as many as
// you like.
func ExampleRelay_Run() {
	ctx := context.Background()
	db := open()
	r, err := outbox.NewRelay(db, outbox.WriterPublisher{W: os.Stdout}, outbox.RelayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err) // ErrNoSchema, ErrReadOnly, ErrAccessDenied: what retrying cannot fix
	}
}

// A consumer applies each message once: the inbox row commits with the
// effect.
func ExampleInbox_Receive() {
	db := open()
	in, err := outbox.NewInbox(db, "billing")
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m outbox.Message) error {
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			first, err := in.Receive(ctx, tx, m.MessageID())
			if err != nil || !first {
				return err // a redelivery: already applied
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO invoices (order_key) VALUES ($1)`, m.Key)
			return err
		})
	}
	_ = handle
}
