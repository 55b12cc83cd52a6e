package kafkapub_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/kafkapub"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// The Kafka publisher against franz-go's in-process kfake cluster: every
// message arrives with its outbox id, and one key's messages keep their
// order on its partition.
func TestKafkaPublisher(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders.created"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pub, closeFn, err := kafkapub.New(c.ListenAddrs())
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		ob := outbox.New(env.DB)
		const n = 60
		for i := 1; i <= n; i++ {
			ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Key: "user-" + strconv.Itoa(i%3), Payload: []byte(strconv.Itoa(i))})
		}
		r, _ := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{BatchSize: 25, Ordered: true})
		// ordered mode publishes one message per key per claim
		for i := 0; i < 100; i++ {
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
			if st, _ := ob.Stats(ctx); st.Pending == 0 {
				break
			}
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("orders.created"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		ids := map[string]bool{}
		last := map[string]int{}
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for len(ids) < n && fctx.Err() == nil {
			fs := cons.PollFetches(fctx)
			fs.EachRecord(func(rec *kgo.Record) {
				var id string
				for _, h := range rec.Headers {
					if h.Key == "outbox-id" {
						id = string(h.Value)
					}
				}
				if id == "" || ids[id] {
					t.Errorf("record without outbox id or duplicated: %q", id)
				}
				ids[id] = true
				v, _ := strconv.Atoi(string(rec.Value))
				if v <= last[string(rec.Key)] {
					t.Errorf("key %s: %d after %d", rec.Key, v, last[string(rec.Key)])
				}
				last[string(rec.Key)] = v
			})
		}
		if len(ids) != n {
			t.Fatalf("consumed %d of %d", len(ids), n)
		}
	})
}
