package session_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Log in: a new token in the login's transaction (the old one, if any,
// stops working there and then).
func ExampleStore_Create() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := session.NewStore(db, session.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var token string
	err = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		token, _, err = store.Create(ctx, tx, "alice", []byte(`{"cart":[]}`))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = token // the cookie's value; the table keeps only its hash
}
