package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"

	_ "github.com/go-sql-driver/mysql"     // database/sql driver "mysql"
	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/migrate"
)

// Open a database/sql pool on any DSN sqlcoord knows, install the schema,
// and match errors with the shared vocabulary.
func ExampleOpen() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL")) // postgres://… or mysql://…
	if errors.Is(err, sqlcoord.ErrReadOnly) {
		log.Fatal("that is a standby: point DATABASE_URL at the primary")
	}
	if err != nil {
		log.Fatal(err) // never contains the password
	}
	defer db.Close()
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		log.Fatal(err)
	}
}

// Use the application's own *sql.DB: sqlcoord checks the server and the
// driver settings it needs, and never closes the pool.
func ExampleWrapDB() {
	ctx := context.Background()
	raw, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlcoord.WrapDB(ctx, raw, sqlcoord.Options{EpochFile: "/var/lib/app/sqlcoord-epoch"})
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlcoord.CheckSchema(ctx, db); err != nil {
		log.Fatal(err) // ErrNoSchema: run `sqlcoord migrate up`
	}
}
