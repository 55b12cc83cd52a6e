package txn_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// TestErrorsSayContextOnce: an idempotency key reused inside txn.Do reads
// "txn: key scope/key: …" once, not "txn: txn: key …: txn: …".
func TestErrorsSayContextOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		keys := txn.NewKeys(env.DB, txn.KeysOptions{})
		begin := func(fp string) error {
			return txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				c, err := keys.Begin(ctx, tx, "orders", "req-A", []byte(fp))
				if err != nil {
					return err
				}
				if c.Replay {
					return nil
				}
				return keys.Complete(ctx, tx, "orders", "req-A", []byte("ok"))
			})
		}
		if err := begin("first"); err != nil {
			t.Fatal(err)
		}
		err := begin("second")
		if !errors.Is(err, txn.ErrKeyReused) {
			t.Fatalf("reuse: %v", err)
		}
		if want := "txn: key orders/req-A: idempotency key reused with a different request"; err.Error() != want {
			t.Fatalf("got  %q\nwant %q", err.Error(), want)
		}
	})
}
