package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A slow or failing topic must not hold up the others. A batch
// holds 100 messages to a topic whose broker hangs (each publish runs into
// PublishTimeout) enqueued before 100 messages to a healthy topic: the
// healthy ones are published at once, the hanging topic is tried once
// per batch, and its other messages stay pending, unattempted.
func TestSlowTopicDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		for _, topic := range []string{"stuck", "healthy"} {
			for range 100 {
				if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: topic, Payload: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var mu sync.Mutex
		var healthyDone time.Duration
		healthy, stuckCalls := 0, 0
		start := time.Now()
		pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if m.Topic == "stuck" {
				mu.Lock()
				stuckCalls++
				mu.Unlock()
				<-ctx.Done() // a broker that never answers
				return ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			healthy++
			if healthy == 100 {
				healthyDone = time.Since(start)
			}
			return nil
		})
		r, err := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{BatchSize: 200, PublishTimeout: 1500 * time.Millisecond, BaseBackoff: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if healthy != 100 || healthyDone > time.Second {
			t.Errorf("healthy topic: %d published, the 100th after %v (want all, well before the stuck topic's timeout)", healthy, healthyDone)
		}
		if stuckCalls != 1 {
			t.Errorf("stuck topic attempted %d times in one batch, want 1", stuckCalls)
		}
		if took > 5*time.Second {
			t.Errorf("batch took %v: the stuck topic cost more than one timeout", took)
		}
		if n != 101 {
			t.Errorf("Once reported %d handled, want 101 (100 published + 1 failed; 99 left)", n)
		}
		st, err := ob.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Published != 100 || st.Pending != 100 {
			t.Errorf("after the batch: %+v, want 100 published, 100 pending", st)
		}
		dead, _ := ob.Dead(ctx, 10)
		if len(dead) != 0 {
			t.Errorf("dead letters: %v", dead)
		}
	})
}

// Stopping a relay while a topic hangs: no new publish starts, the ones in
// flight end (here by PublishTimeout), and the batch commits — the healthy
// topic's messages stay published instead of being rolled back and
// published again.
func TestStopKeepsWhatWasPublished(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		for _, topic := range []string{"stuck", "healthy"} {
			for range 50 {
				if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: topic, Payload: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var healthy atomic.Int64
		started := make(chan struct{}, 1)
		pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if m.Topic == "stuck" {
				select {
				case started <- struct{}{}:
				default:
				}
				<-ctx.Done()
				return ctx.Err()
			}
			healthy.Add(1)
			return nil
		})
		r, err := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{BatchSize: 200, PublishTimeout: time.Second, BaseBackoff: time.Hour, Listen: outbox.ListenOff})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		<-started
		time.Sleep(100 * time.Millisecond) // the healthy topic is done by now
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return after stop")
		}
		st, err := ob.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if healthy.Load() != 50 || st.Published != 50 || st.Pending != 50 {
			t.Fatalf("after stop: %d healthy published, stats %+v; want 50 published (kept), 50 pending", healthy.Load(), st)
		}
	})
}
