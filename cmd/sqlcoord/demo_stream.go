package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "stream", title: "the outbox in commit order: the polling relay (id order) beside the relay streaming PostgreSQL's WAL", run: demoStream})
}

func demoStream(ctx context.Context, e *demoEnv) error {
	db := e.DB
	if err := outbox.CanStream(ctx, db); err != nil {
		e.printf("Skipped: %v.\n", err)
		if db.Dialect().Family() == "mysql" {
			e.printf("On MariaDB the polling relay instead waits between polls for the newest producer's commit (docs/outbox-stream.md).\n")
		}
		return nil
	}
	db.ExecContext(ctx, `DROP TABLE IF EXISTS demo_commit_seq`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE demo_commit_seq (n bigint NOT NULL); INSERT INTO demo_commit_seq VALUES (0)`); err != nil {
		return err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_commit_seq`)
	ob := outbox.New(db)
	// 8 producers: each transaction enqueues its message (its id is taken
	// then), works a little, then takes the counter's row lock: the
	// transactions commit in counter order, not in id order.
	produce := func() (map[string]int64, error) {
		place := map[string]int64{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					id := uuid.NewString()
					var n int64
					err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
						if err := ob.Enqueue(ctx, tx, outbox.Msg{ID: id, Topic: "orders", Key: fmt.Sprint("customer-", w), Payload: []byte(fmt.Sprint(i))}); err != nil {
							return err
						}
						time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
						return tx.QueryRowContext(ctx, `UPDATE demo_commit_seq SET n = n + 1 RETURNING n`).Scan(&n)
					})
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					place[id] = n
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return place, firstErr
	}
	// outOfOrder counts deliveries of a commit after a later commit's.
	outOfOrder := func(place map[string]int64, got []string) int {
		bad, last := 0, int64(0)
		for _, id := range got {
			if place[id] < last {
				bad++
			}
			last = max(last, place[id])
		}
		return bad
	}
	var mu sync.Mutex
	var got []string
	pub := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.UUID)
		return nil
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	e.printf("1. 200 orders from 8 producers whose transactions commit in another order than their outbox ids; the polling relay:\n")
	place, err := produce()
	if err != nil {
		return err
	}
	poll, err := outbox.NewRelay(db, pub, outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: true, Logger: quiet})
	if err != nil {
		return err
	}
	if _, err := poll.Once(ctx); err != nil {
		return err
	}
	e.printf("   published %d, %d of them after a message committed later (id order is insert order)\n", len(got), outOfOrder(place, got))

	e.printf("2. The same with the streaming relay (logical replication, slot of group %q):\n", "demo")
	reset := func() { mu.Lock(); got = nil; mu.Unlock() }
	reset()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	sr, err := pgstream.New(db, pub, pgstream.Options{Group: "demo", DeleteOnPublish: true, Logger: quiet})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- sr.Run(sctx) }()
	defer outbox.DropStreamSlot(context.Background(), db, "demo")
	// streaming once the probe went through (its slot made, the first
	// polling pass over)
	probe := uuid.NewString()
	if err := ob.EnqueueNow(ctx, outbox.Msg{ID: probe, Topic: "probe", Payload: []byte("{}")}); err != nil {
		return err
	}
	seen := func(n int) bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n }
	if err := waitUntil(ctx, 30*time.Second, func() bool { return seen(1) }); err != nil {
		return errors.New("the streaming relay did not start")
	}
	reset()
	place, err = produce()
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, 30*time.Second, func() bool { return seen(len(place)) }); err != nil {
		return fmt.Errorf("the streaming relay published too few of %d", len(place))
	}
	mu.Lock()
	bad, n := outOfOrder(place, got), len(got)
	mu.Unlock()
	e.printf("   published %d, %d out of commit order\n", n, bad)
	if slots, err := outbox.Slots(ctx, db); err == nil {
		for _, s := range slots {
			e.printf("   slot %s: attached %v, %d bytes of WAL retained (doctor and the console show this)\n", s.Name, s.Active, s.LagBytes)
		}
	}
	stop()
	if err := <-done; err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("stream: %d messages out of commit order", bad)
	}
	e.printf("   the slot is dropped when the demo ends (`sqlcoord relay drop-slot --group demo`)\n")
	return nil
}

// waitUntil polls cond until it holds or limit passes.
func waitUntil(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
