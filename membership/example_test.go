package membership_test

import (
	"context"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/membership"
)

// Join a group; work that must run only while a member runs under Ctx.
func ExampleJoin() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	m, err := membership.Join(ctx, db, "thumbnailers", membership.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Leave(context.Background())
	members, err := membership.Members(m.Ctx(), db, "thumbnailers")
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d live members", len(members))
}
