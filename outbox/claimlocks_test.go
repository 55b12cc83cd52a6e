package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A relay's claim locks its batch, not every pending row: with 5,000
// pending messages and batches of 100, the relay's transaction holds
// about 100 row locks while it publishes. (When the claim sorted the
// pending rows by id after reading them through the (state, available_at)
// index, InnoDB locked every row it read — all 5,000 — so the other relays
// skipped them all, and their deletes deadlocked on the index records the
// first one held.)
func TestClaimLocksOnlyItsBatch(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "mysql")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	for i := 0; i < 5000; i += 500 {
		ms := make([]outbox.Msg, 500)
		for j := range ms {
			ms[j] = outbox.Msg{Topic: "orders", Payload: []byte("x")}
		}
		if err := ob.EnqueueNow(ctx, ms...); err != nil {
			t.Fatal(err)
		}
	}
	inside, release := make(chan struct{}), make(chan struct{})
	first := true
	r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
		if first {
			first = false
			close(inside)
			<-release
		}
		return nil
	}), outbox.RelayOptions{BatchSize: 100, PublishConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Once(ctx); done <- err }()
	select {
	case <-inside:
	case <-time.After(20 * time.Second):
		t.Fatal("relay never published")
	}
	// this database's transactions only: the server is shared with the
	// other packages' tests (one of theirs held 3,000 row locks once)
	locked := dbtest.Count(t, env.DB, `SELECT COALESCE(MAX(t.trx_rows_locked), 0) FROM information_schema.INNODB_TRX t
JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE()`)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("a claim of 100 of 5,000 pending messages holds %d row locks", locked)
	if locked > 300 {
		t.Fatalf("the relay's transaction holds %d row locks for a batch of 100 (of 5,000 pending)", locked)
	}
}
