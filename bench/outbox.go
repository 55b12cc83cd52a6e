package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Outbox measures enqueue overhead on the business transaction (bare
// insert vs insert + Enqueue) and relay throughput and commit-to-publish
// latency for batch sizes 1, 100, 1000 with 1 and 3 relays, publishing to
// pub (in-process NATS in `sqlcoord bench`; nil: a no-op publisher).
func Outbox(ctx context.Context, db *sqlcoord.DB, cfg Config, pub outbox.Publisher) ([]Result, error) {
	cfg.defaults()
	s := &suite{db: db, cfg: cfg, group: "outbox"}
	db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_orders2`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_orders2 (id BIGINT PRIMARY KEY)`); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE bench_orders2`)
	ob := outbox.New(db)
	ins := `INSERT INTO bench_orders2 (id) VALUES (` + db.Dialect().Placeholder(1) + `)`
	var mu sync.Mutex
	seq := int64(0)
	next := func() int64 { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	for _, n := range []int{1, 8} {
		poolSize(db, n+8)
		s.run(ctx, "business insert", "", n, func(ctx context.Context, _ int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, ins, next())
				return err
			})
		})
		s.run(ctx, "business insert + Enqueue", "business insert", n, func(ctx context.Context, _ int) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, ins, next()); err != nil {
					return err
				}
				return ob.Enqueue(ctx, tx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
			})
		})
	}
	// drain what the enqueue benchmark left
	if pub == nil {
		pub = outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	}
	if err := drainAll(ctx, db, pub, true); err != nil {
		return s.out, err
	}
	const msgs = 5000
	for _, relays := range []int{1, 3} {
		for _, batch := range []int{1, 100, 1000} {
			total := msgs
			if batch == 1 {
				total = 1000
			}
			thr, err := relayRun(ctx, db, ob, pub, relays, batch, total, true)
			if err != nil {
				return s.out, err
			}
			lat, err := relayRun(ctx, db, ob, pub, relays, batch, min(total, 1000), false)
			if err != nil {
				return s.out, err
			}
			r := Result{Dialect: db.Dialect().Name(), Group: s.group, Case: fmt.Sprintf("relay batch %d → NATS (drain msgs/s; commit→ack at 1000 msgs/s)", batch),
				Clients: relays, Ops: int64(total), Elapsed: thr.el, OpsPerS: float64(total) / thr.el.Seconds(), P50: lat.p50, P99: lat.p99}
			s.out = append(s.out, r)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  %-8s %-44s relays=%d %8.0f msgs/s p50 %v p99 %v\n", r.Dialect, fmt.Sprintf("relay batch %d", batch), relays, r.OpsPerS, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
			}
		}
	}
	return s.out, nil
}

type relayFigures struct {
	el       time.Duration
	p50, p99 time.Duration
}

// relayRun measures relays draining total messages. prefill: the messages
// are enqueued first and the drain is timed (throughput); otherwise a
// producer enqueues 10 messages every 10 ms while the relays run and the
// commit-to-ack latency is recorded.
func relayRun(ctx context.Context, db *sqlcoord.DB, ob *outbox.Outbox[*sql.Tx], pub outbox.Publisher, relays, batch, total int, prefill bool) (relayFigures, error) {
	enqueue := func(n int) error {
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			ms := make([]outbox.Msg, n)
			for j := range ms {
				ms[j] = outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)}
			}
			return ob.Enqueue(ctx, tx, ms...)
		})
	}
	if prefill {
		for i := 0; i < total; i += 500 {
			if err := enqueue(min(500, total-i)); err != nil {
				return relayFigures{}, err
			}
		}
	}
	var lat []time.Duration
	var lm sync.Mutex
	got := make(chan struct{}, total)
	timed := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		if err := pub.Publish(ctx, m); err != nil {
			return err
		}
		lm.Lock()
		lat = append(lat, time.Since(m.CreatedAt))
		lm.Unlock()
		select {
		case got <- struct{}{}:
		default: // a duplicate (a batch rolled back after publishing) beyond total
		}
		return nil
	})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < relays; i++ {
		r, err := outbox.NewRelay(db, timed, outbox.RelayOptions{BatchSize: batch, DeleteOnPublish: true}) // default polling: what users get
		if err != nil {
			return relayFigures{}, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(rctx) }()
	}
	start := time.Now()
	if !prefill {
		go func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for i := 0; i < total; i += 10 {
				<-t.C
				if rctx.Err() != nil || enqueue(min(10, total-i)) != nil {
					return
				}
			}
		}()
	}
	timeout := time.After(3 * time.Minute)
	for i := 0; i < total; i++ {
		select {
		case <-got:
		case <-timeout:
			cancel()
			wg.Wait()
			return relayFigures{}, fmt.Errorf("bench: relay published %d of %d", i, total)
		}
	}
	f := relayFigures{el: time.Since(start)}
	cancel()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	f.p50, f.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return f, nil
}
