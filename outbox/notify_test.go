package outbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/internal/dialect"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// Issue 14: a NOTIFY serialises the commits of every notifying
// transaction, so Enqueue sends it only while a relay listens (a live
// member of dialect.OutboxListeners), and a listening relay is one.
func TestEnqueueNotifiesOnlyWhileARelayListens(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	var got atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	watcher := env.Open(t)
	go watcher.Listen(lctx, "coord_outbox", sqlcoord.ListenOptions{}, func() { got.Add(1) })
	time.Sleep(300 * time.Millisecond) // LISTEN in place
	enqueueAndWait := func() int64 {
		before := got.Load()
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		return got.Load() - before
	}
	t.Run("no relay listening: no NOTIFY", func(t *testing.T) {
		if n := enqueueAndWait(); n != 0 {
			t.Fatalf("%d notifications with no listening relay", n)
		}
	})
	t.Run("a listening relay registers; then Enqueue notifies", func(t *testing.T) {
		r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }),
			outbox.RelayOptions{Listen: outbox.ListenOn, PollMax: time.Hour, PollMin: time.Hour, PollBusy: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rstop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(rctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ms, err := membership.Members(ctx, env.DB, dialect.OutboxListeners)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("listening relay not registered: %v", ms)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := enqueueAndWait(); n < 1 {
			t.Fatalf("no notification while a relay listens")
		}
		rstop()
		<-done
		ms, _ := membership.Members(ctx, env.DB, dialect.OutboxListeners)
		if len(ms) != 0 {
			t.Fatalf("a stopped relay stays registered: %v", ms)
		}
		if n := enqueueAndWait(); n != 0 {
			t.Fatalf("%d notifications after the relay stopped", n)
		}
	})
}
