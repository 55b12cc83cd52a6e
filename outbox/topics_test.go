package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Relay groups by topic. Two polling relays with disjoint topic
// filters, on both dialects, each publish only their own topics, and
// together every message once; an ordered relay with a filter keeps its
// keys in order.
func TestRelayTopicFilters(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		var msgs []outbox.Msg
		for i := range 300 {
			topic := []string{"orders", "mail", "audit"}[i%3]
			msgs = append(msgs, outbox.Msg{Topic: topic, Key: fmt.Sprint("k", i%5), Payload: []byte(fmt.Sprint(i))})
		}
		if err := ob.EnqueueNow(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string][]string{} // relay → topic/payload, in publish order
		relay := func(name string, ordered bool, topics ...string) {
			r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
				mu.Lock()
				defer mu.Unlock()
				got[name] = append(got[name], m.Topic+"/"+m.Key+"/"+string(m.Payload))
				return nil
			}), outbox.RelayOptions{Topics: topics, Ordered: ordered, BatchSize: 20, Listen: outbox.ListenOff,
				PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); r.Run(rctx) }()
			t.Cleanup(func() { cancel(); <-done })
		}
		relay("orders", true, "orders")
		relay("rest", false, "mail", "audit", "mail")
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(got["orders"]) + len(got["rest"])
			mu.Unlock()
			if n >= 300 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // a second publish, if any, lands now
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for name, list := range got {
			for _, m := range list {
				topic := strings.SplitN(m, "/", 2)[0]
				if (name == "orders") != (topic == "orders") {
					t.Errorf("relay %s published %s: outside its topics", name, m)
				}
				if seen[m] {
					t.Errorf("%s published twice", m)
				}
				seen[m] = true
			}
		}
		if len(seen) != 300 {
			t.Fatalf("%d of 300 messages published", len(seen))
		}
		last := map[string]int{} // the ordered relay: per key, payloads grow
		for _, m := range got["orders"] {
			var i int
			parts := strings.Split(m, "/")
			fmt.Sscan(parts[2], &i)
			if p, ok := last[parts[1]]; ok && i < p {
				t.Errorf("key %s: %d published after %d", parts[1], i, p)
			}
			last[parts[1]] = i
		}
	})
}

func TestRelayTopicFilterBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		pub := outbox.WriterPublisher{W: nil}
		many := make([]string, 65)
		for i := range many {
			many[i] = fmt.Sprint("t", i)
		}
		for name, topics := range map[string][]string{
			"empty":     {""},
			"not UTF-8": {"a\xffb"},
			"NUL":       {"a\x00b"},
			"too long":  {strings.Repeat("x", 256)},
			"65 topics": many,
		} {
			t.Run(name, func(t *testing.T) {
				if _, err := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{Topics: topics}); !errors.Is(err, outbox.ErrInvalid) {
					t.Fatalf("%v: want ErrInvalid", err)
				}
			})
		}
	}, dbtest.NoMigrate())
}
