package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// MariaDB: the polling relay's pause ends when the producer inserting the
// newest row commits, and producers never wait on it.
func TestWaitCommit(t *testing.T) {
	env := dbtest.New(t, "mysql")
	ctx := context.Background()
	r, err := NewRelay(env.DB, PublisherFunc(func(context.Context, Message) error { return nil }), RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ob := New(env.DB)
	t.Run("a committed row newer than any seen ends it at once", func(t *testing.T) {
		if err := ob.EnqueueNow(ctx, Msg{Topic: "t", Payload: []byte("a")}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if !r.waitCommit(ctx, 5*time.Second) || time.Since(t0) > 2*time.Second {
			t.Fatalf("took %v", time.Since(t0))
		}
	})
	t.Run("nothing newer and nothing in flight: the whole pause", func(t *testing.T) {
		t0 := time.Now()
		if r.waitCommit(ctx, 300*time.Millisecond) || time.Since(t0) < 250*time.Millisecond {
			t.Fatalf("woke after %v", time.Since(t0))
		}
	})
	t.Run("a producer's commit ends it", func(t *testing.T) {
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Enqueue(ctx, tx, Msg{Topic: "t", Payload: []byte("b")}); err != nil {
			t.Fatal(err)
		}
		committed := make(chan time.Time, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			// another producer is not held up by the waiting relay
			t1 := time.Now()
			if err := ob.EnqueueNow(ctx, Msg{Topic: "t", Payload: []byte("c")}); err != nil {
				t.Error(err)
			}
			if d := time.Since(t1); d > 2*time.Second {
				t.Errorf("a producer waited %v behind the relay", d)
			}
			tx.Commit()
			committed <- time.Now()
		}()
		woke := r.waitCommit(ctx, 20*time.Second)
		at := time.Now()
		c := <-committed
		if !woke || at.Sub(c) > 2*time.Second {
			t.Fatalf("woke %v, %v after the commit", woke, at.Sub(c))
		}
	})
}
