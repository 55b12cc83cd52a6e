package coord_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// SetIdleTimeout bounds one transaction. On MySQL/MariaDB it is
// a session variable; a pool Open made resets it before the connection
// serves anyone else, so the next transaction (here on the same and only
// connection) is not cut by a timeout it never asked for.
func TestIdleTimeoutEndsWithTheTransaction(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db, err := sqlcoord.Open(ctx, env.DSN, sqlcoord.Options{MaxOpenConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		c := coord.New(db)
		q := `SELECT @@session.idle_transaction_timeout`
		if env.Family == "postgres" {
			q = `SELECT current_setting('idle_in_transaction_session_timeout')`
		}
		read := func(tx *sql.Tx) string {
			var v string
			if err := tx.QueryRowContext(ctx, q).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		tx, _ := db.BeginTx(ctx, nil)
		before := read(tx)
		tx.Rollback()
		for _, end := range []string{"commit", "rollback"} {
			tx, _ := db.BeginTx(ctx, nil)
			if err := c.SetIdleTimeout(ctx, tx, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := read(tx); got == before {
				t.Fatalf("idle timeout not set inside the transaction (%s)", got)
			}
			if end == "commit" {
				tx.Commit()
			} else {
				tx.Rollback()
			}
			tx, _ = db.BeginTx(ctx, nil)
			if got := read(tx); got != before {
				t.Errorf("after %s the pooled connection's next transaction has idle timeout %s, want %s", end, got, before)
			}
			tx.Rollback()
		}
	})
}
