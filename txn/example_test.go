package txn_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/txn"
)

func open() *sqlcoord.DB {
	db, err := sqlcoord.Open(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// Do retries deadlocks and serialization failures, and with a commit
// marker proves whether a COMMIT whose reply was lost happened.
func ExampleDo() {
	ctx := context.Background()
	db := open()
	err := txn.Do(ctx, db, txn.Options{CommitMarker: "transfer:7f3a"}, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 10 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = 2`)
		return err
	})
	if errors.Is(err, sqlcoord.ErrCommitUnknown) {
		log.Print("the outcome could not be proven: reconcile before retrying")
	}
}

// Record: do the effect, then record the key with the response, in one
// transaction; a duplicate learns it is one and rolls its effect back.
func ExampleKeys_Record() {
	ctx := context.Background()
	db := open()
	keys := txn.NewKeys(db, txn.KeysOptions{})
	var response []byte
	errReplay := errors.New("replay")
	err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO payments (amount) VALUES (10)`); err != nil {
			return err
		}
		claim, err := keys.Record(ctx, tx, "payments", "req-91", txn.Fingerprint([]byte("POST /pay 10")), []byte(`{"ok":true}`))
		if claim.Replay {
			response = claim.Response
			return errReplay
		}
		return err
	})
	if err != nil && !errors.Is(err, errReplay) {
		log.Fatal(err)
	}
	_ = response
}

// Begin before an effect that is costly: a concurrent duplicate waits,
// a completed key replays its response.
func ExampleKeys_Begin() {
	ctx := context.Background()
	db := open()
	keys := txn.NewKeys(db, txn.KeysOptions{})
	err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		claim, err := keys.Begin(ctx, tx, "orders", "req-12", nil)
		if err != nil || claim.Replay {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			return err
		}
		return keys.Complete(ctx, tx, "orders", "req-12", []byte(`{"order":12}`))
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A TCC participant: Confirm/Cancel idempotent, an empty Cancel succeeds,
// and a Try that arrives after its Cancel does nothing.
func ExampleBarrier() {
	ctx := context.Background()
	db := open()
	b := txn.NewBarrier(db)
	ran, err := b.Try(ctx, "gid-1", "reserve-stock", func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE stock SET reserved = reserved + 1 WHERE sku = 'book-42'`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("try ran: %v", ran)
}
