package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// Cleanup deletes published rows while producers enqueue and relays mark
// what they published: a batch of the cleanup, held open in a
// transaction, blocks neither. (On MariaDB the cleanup once sorted every
// published row by published_at, which no index orders, and its DELETE
// locked every row it read and the gap at the table's end: producers
// waited for each batch — 0.03× their throughput while it ran, in
// `sqlcoord bench growth`.)
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
		// one batch of the cleanup, its transaction left open
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, env.DB.Dialect().Q.OutboxCleanup, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1000 {
			t.Fatalf("the cleanup batch deleted %d rows, want 1000", n)
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
			locked := dbtest.Count(t, env.DB, `SELECT COALESCE(MAX(trx_rows_locked), 0) FROM information_schema.INNODB_TRX`)
			t.Logf("a cleanup batch of 1,000 of 3,000 published rows holds %d row locks", locked)
			if locked > 2200 {
				t.Errorf("a cleanup batch of 1,000 holds %d row locks (3,000 published, 2 pending)", locked)
			}
		}
	})
}
