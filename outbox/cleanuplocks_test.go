package outbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Cleanup deletes published rows while producers enqueue and relays mark
// what they published: a batch of the cleanup, held open in a
// transaction, blocks neither. (On MariaDB the cleanup was one DELETE …
// ORDER BY … LIMIT; walking the primary key under REPEATABLE READ it
// locked every row it read — pending ones too — and the gap at the
// table's end where producers insert: 0.02–0.03× their throughput while
// it ran, in `sqlcoord bench growth`.)
func TestCleanupBlocksNeitherProducersNorRelays(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		nop := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
		for i := 0; i < 3000; i += 500 {
			ms := make([]outbox.Msg, 500)
			for j := range ms {
				ms[j] = outbox.Msg{Topic: "orders", Payload: []byte("x")}
			}
			if err := ob.EnqueueNow(ctx, ms...); err != nil {
				t.Fatal(err)
			}
		}
		r, err := outbox.NewRelay(env.DB, nop, outbox.RelayOptions{BatchSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for {
			n, err := r.Once(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("pending")}); err != nil {
			t.Fatal(err)
		}
		// one batch of the cleanup, its transaction left open: a batch
		// larger than what is left, so it reads to the end of the table
		// (the last batch of every cleanup)
		// (as Cleanup runs it: READ COMMITTED)
		tx, err := env.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		n, err := env.DB.Dialect().OutboxCleanup(ctx, env.DB.TxExecutor(tx), 0, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if n != 3000 {
			t.Fatalf("the cleanup batch deleted %d rows, want 3000", n)
		}
		t.Run("a producer enqueues", func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := ob.EnqueueNow(wctx, outbox.Msg{Topic: "orders", Payload: []byte("y")}); err != nil {
				t.Fatalf("Enqueue while a cleanup batch is open: %v", err)
			}
		})
		t.Run("a relay marks its batch published", func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			n, err := r.Once(wctx)
			if err != nil || n == 0 {
				t.Fatalf("relay while a cleanup batch is open: %d published, %v", n, err)
			}
		})
		if env.Family == "mysql" {
			// this database's transactions only (the server is shared)
			locked := dbtest.Count(t, env.DB, `SELECT COALESCE(MAX(t.trx_rows_locked), 0) FROM information_schema.INNODB_TRX t
JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE()`)
			t.Logf("a cleanup batch of the 3,000 published rows holds %d row locks", locked)
			if locked > 6100 {
				t.Errorf("a cleanup batch of 3,000 holds %d row locks (3,000 published rows, 2 pending)", locked)
			}
		}
	})
}
