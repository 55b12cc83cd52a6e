package outbox_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A relay process frozen (SIGSTOP) in the middle of a batch holds its
// claimed rows only until FrozenTimeout: then PostgreSQL ends its session
// and another relay publishes the batch.
func TestFrozenRelayReleasesItsBatch(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	for range 20 {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	p := dbtest.Spawn(t, "frozen-relay", "DSN="+env.DSN, "FROZEN_TIMEOUT=1500ms")
	p.WaitLine(t, "PUBLISHING", 30*time.Second)
	p.Signal(syscall.SIGSTOP)
	published := 0
	r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { published++; return nil }),
		outbox.RelayOptions{Listen: outbox.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for published < 20 && time.Since(start) < 15*time.Second {
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if published != 20 {
		t.Fatalf("%d of 20 messages published in %v while the first relay is frozen", published, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("the frozen relay's batch was published by another relay after %v", time.Since(start).Round(time.Millisecond))
}

// A live relay whose publishing takes longer than FrozenTimeout keeps its
// batch: it keeps the transaction awake.
func TestSlowPublishOutlivesFrozenTimeout(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	for range 3 {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "slow", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
		time.Sleep(700 * time.Millisecond) // 2.1 s for the batch
		return nil
	}), outbox.RelayOptions{FrozenTimeout: 600 * time.Millisecond, Listen: outbox.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Once(ctx); err != nil || n != 3 {
		t.Fatalf("Once: %d %v (a live relay lost its batch to the idle timeout)", n, err)
	}
	if st, _ := ob.Stats(ctx); st.Published != 3 {
		t.Fatalf("stats %+v, want 3 published", st)
	}
}
