package migrate_test

import (
	"context"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/migrate"
)

// Install or upgrade the schema (safe to run from every instance at
// start: golang-migrate holds a database lock while it runs).
func ExampleMigrate() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		log.Fatal(err) // sqlcoord.ErrDirty: a migration failed half-way; see `sqlcoord migrate force`
	}
}
