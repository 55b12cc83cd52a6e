package txn_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// 10 concurrent duplicates x 50 rounds: exactly one effect per key, and
// every duplicate replays the first response.
func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE orders (id INT PRIMARY KEY, request_id VARCHAR(40) NOT NULL)`)
		ph := db.Dialect().Placeholder
		keys := txn.NewKeys(db, txn.KeysOptions{})
		var mu sync.Mutex
		nextID := 0
		for round := 0; round < 50; round++ {
			reqID := fmt.Sprintf("req-%d", round)
			fp := txn.Fingerprint([]byte("POST /orders"), []byte(`{"sku":42}`))
			responses := make([]string, 10)
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for i := 0; i < 10; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := txn.Do(ctx, db, txn.Options{MaxAttempts: 10}, func(ctx context.Context, tx *sql.Tx) error {
						c, err := keys.Begin(ctx, tx, "user-1001", reqID, fp)
						if err != nil {
							return err
						}
						if c.Replay {
							responses[i] = string(c.Response)
							return nil
						}
						mu.Lock()
						nextID++
						id := nextID
						mu.Unlock()
						if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, request_id) VALUES (`+ph(1)+`, `+ph(2)+`)`, id, reqID); err != nil {
							return err
						}
						resp := fmt.Sprintf("order %d", id)
						responses[i] = resp
						return keys.Complete(ctx, tx, "user-1001", reqID, []byte(resp))
					})
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("round %d: %v", round, err)
			}
			if n := dbtest.Count(t, db, `SELECT count(*) FROM orders WHERE request_id = `+ph(1), reqID); n != 1 {
				t.Fatalf("round %d: %d orders for one request id", round, n)
			}
			for i := range responses {
				if responses[i] != responses[0] || responses[0] == "" {
					t.Fatalf("round %d: responses differ: %q", round, responses)
				}
			}
		}
	})
}

func TestIdempotencyScopesAndReuse(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		keys := txn.NewKeys(db, txn.KeysOptions{})
		fp := txn.Fingerprint([]byte("a"))
		once := func(scope, key string, fp []byte) (txn.Claim, error) {
			var c txn.Claim
			err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				var err error
				if c, err = keys.Begin(ctx, tx, scope, key, fp); err != nil || c.Replay {
					return err
				}
				return keys.Complete(ctx, tx, scope, key, []byte(scope+" done"))
			})
			return c, err
		}
		if c, err := once("user-1001", "r1", fp); err != nil || c.Replay {
			t.Fatalf("first: %+v %v", c, err)
		}
		c, err := once("user-1001", "r1", fp)
		if err != nil || !c.Replay || string(c.Response) != "user-1001 done" {
			t.Fatalf("replay: %+v %v", c, err)
		}
		// another user's scope is another key space
		if c, err := once("user-1002", "r1", fp); err != nil || c.Replay {
			t.Fatalf("user 1002 reusing 1001's id: %+v %v", c, err)
		}
		// same key, different request
		if _, err := once("user-1001", "r1", txn.Fingerprint([]byte("b"))); !errors.Is(err, txn.ErrKeyReused) {
			t.Fatalf("reuse: %v", err)
		}
		// a rolled-back attempt leaves no key
		tx, _ := db.BeginTx(ctx, nil)
		if _, err := keys.Begin(ctx, tx, "user-1001", "r2", fp); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if c, err := once("user-1001", "r2", fp); err != nil || c.Replay {
			t.Fatalf("after rollback: %+v %v", c, err)
		}
		// invalid input
		tx, _ = db.BeginTx(ctx, nil)
		if _, err := keys.Begin(ctx, tx, "", "k", fp); !errors.Is(err, txn.ErrInvalidKey) {
			t.Fatalf("empty scope: %v", err)
		}
		tx.Rollback()

		// OnBusy: Fail returns ErrInProgress while another transaction holds the key
		fail := txn.NewKeys(db, txn.KeysOptions{OnBusy: txn.Fail})
		a, _ := db.BeginTx(ctx, nil)
		defer a.Rollback()
		if _, err := keys.Begin(ctx, a, "user-1001", "r3", fp); err != nil {
			t.Fatal(err)
		}
		b, _ := db.BeginTx(ctx, nil)
		start := time.Now()
		_, err = fail.Begin(ctx, b, "user-1001", "r3", fp)
		b.Rollback()
		if !errors.Is(err, txn.ErrInProgress) || time.Since(start) > 3*time.Second {
			t.Fatalf("busy key: %v after %v", err, time.Since(start))
		}
		a.Rollback()

		// cleanup in batches
		for i := 0; i < 25; i++ {
			once("bulk", fmt.Sprintf("k%d", i), fp)
		}
		n, err := keys.Cleanup(ctx, 0, 10)
		if err != nil || n < 25 {
			t.Fatalf("cleanup: %d %v", n, err)
		}
		if c, err := once("bulk", "k1", fp); err != nil || c.Replay {
			t.Fatalf("after cleanup the key is free: %+v %v", c, err)
		}
	})
}

func TestIdempotencyTwoPhase(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		keys := txn.NewKeys(env.DB, txn.KeysOptions{LockFor: 300 * time.Millisecond})
		fp := txn.Fingerprint([]byte("charge 10 EUR"))
		c, err := keys.Start(ctx, "payments", "p1", fp)
		if err != nil || c.Replay || c.Recovered {
			t.Fatalf("start: %+v %v", c, err)
		}
		if _, err := keys.Start(ctx, "payments", "p1", fp); !errors.Is(err, txn.ErrInProgress) {
			t.Fatalf("concurrent start: %v", err)
		}
		if err := keys.Finish(ctx, "payments", "p1", []byte("charged")); err != nil {
			t.Fatal(err)
		}
		if err := keys.Finish(ctx, "payments", "p1", []byte("again")); !errors.Is(err, txn.ErrNotOwner) {
			t.Fatalf("double finish: %v", err)
		}
		c, err = keys.Start(ctx, "payments", "p1", fp)
		if err != nil || !c.Replay || string(c.Response) != "charged" {
			t.Fatalf("replay: %+v %v", c, err)
		}
		// a crashed worker leaves a pending key: recovered after LockFor
		if _, err := keys.Start(ctx, "payments", "p2", fp); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		c, err = keys.Start(ctx, "payments", "p2", fp)
		if err != nil || !c.Recovered {
			t.Fatalf("recovery: %+v %v", c, err)
		}
		if err := keys.Abandon(ctx, "payments", "p2"); err != nil {
			t.Fatal(err)
		}
		if c, err := keys.Start(ctx, "payments", "p2", fp); err != nil || c.Recovered || c.Replay {
			t.Fatalf("after abandon: %+v %v", c, err)
		}
	})
}
