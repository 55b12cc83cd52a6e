package ids_test

import (
	"context"
	"log"
	"os"
	"time"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
)

func open() *sqlcoord.DB {
	db, err := sqlcoord.Open(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// Segment ids: dense, never issued twice across processes.
func ExampleNewSegments() {
	ctx := context.Background()
	db := open()
	seg, err := ids.NewSegments(db, "orders", ids.SegmentOptions{AutoCreate: true})
	if err != nil {
		log.Fatal(err)
	}
	id, err := seg.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Print(id)
}

// Snowflake ids with a worker id leased from the database.
func ExampleLeaseWorker() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := open()
	w, err := ids.LeaseWorker(ctx, db, ids.WorkerOptions{})
	if err != nil {
		log.Fatal(err) // ids.ErrEpochGrace just after a failover: retry after GraceError.RetryAfter
	}
	defer w.Close(context.Background())
	id, err := w.Next()
	if err != nil {
		log.Fatal(err)
	}
	log.Print(id)
}

// UUIDv7: time-ordered, no database needed.
func ExampleNewUUIDv7() {
	u, err := ids.NewUUIDv7()
	if err != nil {
		log.Fatal(err)
	}
	log.Print(u)
}
