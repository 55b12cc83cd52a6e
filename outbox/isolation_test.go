package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// Issue 14: a slow or failing topic must not hold up the others. A batch
// holds 100 messages to a topic whose broker hangs (each publish runs into
// PublishTimeout) enqueued before 100 messages to a healthy topic: the
// healthy ones are published at once, the hanging topic is tried once
// per batch, and its other messages stay pending, unattempted.
func TestSlowTopicDoesNotStallOthers(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.NewOutbox(env.DB)
		for _, topic := range []string{"stuck", "healthy"} {
			for range 100 {
				if err := ob.EnqueueNow(ctx, outbox.New{Topic: topic, Payload: []byte("x")}); err != nil {
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
