package outbox_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// idList shortens the id lists of the relays' statements in a deadlock report.
var idList = regexp.MustCompile(`\(([0-9]+),[0-9,]+\)`)

// Three MariaDB relays draining batches of 1,000 while a producer keeps
// enqueueing: no deadlock (which rolled back batches already published, so
// they were published again), and every message published exactly once.
// Before the mark/delete statements stopped at their batch's last row
// (ORDER BY id LIMIT n), about one run in three deadlocked.
func TestRelaysDoNotDeadlockOnMariaDB(t *testing.T) {
	t.Parallel()
	for round := 0; round < 2; round++ {
		env := dbtest.New(t, "mysql")
		ctx := context.Background()
		ob := outbox.New(env.DB)
		var enqueued, published atomic.Int64
		for i := 0; i < 20000; i += 500 {
			ms := make([]outbox.Msg, 500)
			for j := range ms {
				ms[j] = outbox.Msg{Topic: "orders", Payload: []byte("x")}
			}
			if err := ob.EnqueueNow(ctx, ms...); err != nil {
				t.Fatal(err)
			}
			enqueued.Add(500)
		}
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { published.Add(1); return nil }),
				outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: true})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.Run(rctx) }()
		}
		prod := make(chan struct{})
		go func() {
			defer close(prod)
			for i := 0; i < 200; i++ {
				ms := make([]outbox.Msg, 10)
				for j := range ms {
					ms[j] = outbox.Msg{Topic: "orders", Payload: []byte("x")}
				}
				if ob.EnqueueNow(ctx, ms...) == nil {
					enqueued.Add(10)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		<-prod
		deadline := time.Now().Add(time.Minute)
		for published.Load() < enqueued.Load() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a republished batch would show now
		cancel()
		wg.Wait()
		if p, e := published.Load(), enqueued.Load(); p != e {
			t.Errorf("round %d: published %d of %d enqueued messages", round, p, e)
		}
		var typ, name, status string
		if err := env.DB.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(status, "LATEST DETECTED DEADLOCK"); i >= 0 {
			d := idList.ReplaceAllString(status[i:], "($1,…)")
			if j := strings.Index(d, "\nTRANSACTIONS\n"); j > 0 {
				d = d[:j]
			}
			t.Errorf("round %d: InnoDB deadlock:\n%.12000s", round, d)
		}
	}
}
