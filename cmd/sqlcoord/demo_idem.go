package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "idempotency", title: "10 concurrent submissions of one request id", run: demoIdem})
}

func demoIdem(ctx context.Context, e *demoEnv) error {
	db := e.DB
	ph := db.Dialect().Placeholder
	db.ExecContext(ctx, `DROP TABLE IF EXISTS demo_orders`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE demo_orders (id INT PRIMARY KEY, user_id INT NOT NULL, request_id VARCHAR(40) NOT NULL)`); err != nil {
		return err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_orders`)
	var mu sync.Mutex
	next := 0
	newID := func() int { mu.Lock(); defer mu.Unlock(); next++; return next }
	countOrders := func(user int, req string) int {
		var n int
		db.QueryRowContext(ctx, `SELECT count(*) FROM demo_orders WHERE user_id = `+ph(1)+` AND request_id = `+ph(2), user, req).Scan(&n)
		return n
	}
	fan := func(f func() error) error {
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		start := make(chan struct{})
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := f(); err != nil {
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		return <-errs
	}

	e.printf("1. check-then-insert (SELECT count, then INSERT; the client decides), 10 concurrent submissions:\n")
	for round := 1; round <= 3; round++ {
		req := fmt.Sprintf("naive-%d", round)
		err := fan(func() error {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM demo_orders WHERE request_id = `+ph(1), req).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			time.Sleep(2 * time.Millisecond) // the business logic between check and act
			_, err := db.ExecContext(ctx, `INSERT INTO demo_orders VALUES (`+ph(1)+`, 1001, `+ph(2)+`)`, newID(), req)
			return err
		})
		if err != nil {
			return err
		}
		e.printf("   round %d: %d orders created for one request id\n", round, countOrders(1001, req))
	}

	keys := txn.NewKeys(db, txn.KeysOptions{})
	submit := func(user int, req string) (replayed bool, err error) {
		scope := fmt.Sprintf("user-%d", user)
		err = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			c, err := keys.Begin(ctx, tx, scope, req, txn.Fingerprint([]byte("create order")))
			if err != nil || c.Replay {
				replayed = c.Replay
				return err
			}
			id := newID()
			if _, err := tx.ExecContext(ctx, `INSERT INTO demo_orders VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, id, user, req); err != nil {
				return err
			}
			return keys.Complete(ctx, tx, scope, req, []byte(fmt.Sprintf("order %d", id)))
		})
		return replayed, err
	}
	e.printf("2. idempotency key (unique (scope, key) in the same transaction as the order):\n")
	for round := 1; round <= 3; round++ {
		req := fmt.Sprintf("req-%d", round)
		var replays int
		var rm sync.Mutex
		err := fan(func() error {
			r, err := submit(1001, req)
			rm.Lock()
			if r {
				replays++
			}
			rm.Unlock()
			return err
		})
		if err != nil {
			return err
		}
		e.printf("   round %d: %d order created, %d submissions replayed the stored response\n", round, countOrders(1001, req), replays)
	}
	e.printf("3. user 1002 sends user 1001's request id \"req-1\" (keys are scoped per user):\n")
	r, err := submit(1002, "req-1")
	if err != nil {
		return err
	}
	e.printf("   replayed=%v; orders: user 1001 %d, user 1002 %d\n", r, countOrders(1001, "req-1"), countOrders(1002, "req-1"))
	return nil
}
