package sqlcoord_test

import (
	"context"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/sqlxdriver"
)

// TestBeginOwnedFailsWithNoTransaction: when BEGIN fails, the database/sql
// stacks return a nil OwnedTx, as pgxv5 does, so that a caller checking
// the transaction rather than the error cannot roll back a *sql.Tx that
// does not exist (the streaming relay's transaction begun ahead did, and
// panicked when the session ended during its BEGIN).
func TestBeginOwnedFailsWithNoTransaction(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		x, err := sqlxdriver.Wrap(context.Background(), sqlx.NewDb(env.DB.DB, env.DB.Dialect().DriverName()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for name, begin := range map[string]func() (any, error){
			"database/sql": func() (any, error) { return core.Owned(ctx, env.DB, nil) },
			"sqlx":         func() (any, error) { return core.Owned(ctx, x, nil) },
		} {
			t.Run(name, func(t *testing.T) {
				tx, err := begin()
				if err == nil {
					t.Fatal("BEGIN with a cancelled context succeeded")
				}
				if tx != nil {
					t.Fatalf("a failed BEGIN returned a transaction: %#v", tx)
				}
			})
		}
	})
}
