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
	ob := outbox.NewOutbox(db)
	ins := `INSERT INTO bench_orders2 (id) VALUES (` + db.Dialect.Placeholder(1) + `)`
	var mu sync.Mutex
	seq := int64(0)
	next := func() int64 { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	for _, n := range []int{1, 8} {
		db.SetMaxOpenConns(n + 8)
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
				return ob.Enqueue(ctx, tx, outbox.New{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
			})
		})
	}
	// drain what the enqueue benchmark left
	if pub == nil {
		pub = outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	}
	drain, _ := outbox.NewRelay(db, pub, outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: true})
	for {
		n, err := drain.Once(ctx)
		if err != nil {
			return s.out, err
		}
		if n == 0 {
			break
		}
	}
	const msgs = 5000
	for _, relays := range []int{1, 3} {
		for _, batch := range []int{1, 100, 1000} {
			total := msgs
			if batch == 1 {
				total = 1000
			}
			// producers enqueue while relays run, so latency is commit to ack
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
				got <- struct{}{}
				return nil
			})
			rctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for i := 0; i < relays; i++ {
				r, err := outbox.NewRelay(db, timed, outbox.RelayOptions{BatchSize: batch, DeleteOnPublish: true, PollMin: 2 * time.Millisecond, PollMax: 20 * time.Millisecond, Listen: true})
				if err != nil {
					cancel()
					return s.out, err
				}
				wg.Add(1)
				go func() { defer wg.Done(); r.Run(rctx) }()
			}
			start := time.Now()
			go func() {
				for i := 0; i < total; i += 50 {
					txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
						batchMsgs := make([]outbox.New, 0, 50)
						for j := 0; j < 50 && i+j < total; j++ {
							batchMsgs = append(batchMsgs, outbox.New{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
						}
						return ob.Enqueue(ctx, tx, batchMsgs...)
					})
				}
			}()
			timeout := time.After(2 * time.Minute)
			for i := 0; i < total; i++ {
				select {
				case <-got:
				case <-timeout:
					cancel()
					wg.Wait()
					return s.out, fmt.Errorf("bench: relay published %d of %d", i, total)
				}
			}
			el := time.Since(start)
			cancel()
			wg.Wait()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			r := Result{Dialect: db.Dialect.Name(), Group: s.group, Case: fmt.Sprintf("relay batch %d → NATS (msgs/s, commit→ack)", batch),
				Clients: relays, Ops: int64(total), Elapsed: el, OpsPerS: float64(total) / el.Seconds(),
				P50: lat[len(lat)/2], P99: lat[len(lat)*99/100]}
			s.out = append(s.out, r)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  %-8s %-44s relays=%d %8.0f msgs/s p50 %v p99 %v\n", r.Dialect, r.Case, relays, r.OpsPerS, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
			}
		}
	}
	return s.out, nil
}
