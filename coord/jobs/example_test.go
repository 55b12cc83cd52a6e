package jobs_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/txn"
)

// A job that runs once per slot however many instances run the
// scheduler; its effect and its completion commit together.
func ExampleScheduler() {
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	s := jobs.NewScheduler(db, jobs.Options{})
	err = s.Register(jobs.Job{Name: "invoice-run", Schedule: "0 2 * * *", Run: func(ctx context.Context, info jobs.Info) error {
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			if err := jobs.Fence(ctx, db, tx, info.Run()); err != nil {
				return err // jobs.ErrSuperseded: another instance took this run over
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO invoice_runs (day) VALUES (current_date)`); err != nil {
				return err
			}
			return jobs.Complete(ctx, db, tx, info.Run())
		})
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
