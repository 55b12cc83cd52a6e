package txn_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// placeOrder is a request handler in write-once mode: the effect (an
// order row), then Record with the response; on Replay it rolls back and
// answers with the stored response.
func placeOrder(ctx context.Context, db *sqlcoord.DB, keys *txn.Keys[*sql.Tx], reqID, who string) (string, error) {
	var answer string
	err := txn.Do(ctx, db, txn.Options{MaxAttempts: 20}, func(ctx context.Context, tx *sql.Tx) error {
		ph := db.Dialect().Placeholder
		if _, err := tx.ExecContext(ctx, `INSERT INTO rec_orders (request_id, placed_by) VALUES (`+ph(1)+`, `+ph(2)+`)`, reqID, who); err != nil {
			return err
		}
		resp := "order by " + who
		c, err := keys.Record(ctx, tx, "user-7", reqID, txn.Fingerprint([]byte("POST /orders")), []byte(resp))
		if err != nil {
			return err
		}
		if c.Replay {
			answer = string(c.Response)
			return errReplay
		}
		answer = resp
		return nil
	})
	if errors.Is(err, errReplay) {
		err = nil // rolled back: the duplicate's effect is undone
	}
	return answer, err
}

var errReplay = errors.New("replay: roll back")

// runRecorder (a helper process) places ROUNDS orders, one per request id,
// racing the test's goroutines and the other processes on the same ids.
func runRecorder(ctx context.Context, db *sqlcoord.DB) error {
	keys := txn.NewKeys(db, txn.KeysOptions{})
	n, _ := strconv.Atoi(os.Getenv("ROUNDS"))
	fmt.Println("READY")
	at, _ := strconv.ParseInt(os.Getenv("START_AT"), 10, 64)
	time.Sleep(time.Until(time.UnixMilli(at))) // everyone starts together
	for r := 0; r < n; r++ {
		if _, err := placeOrder(ctx, db, keys, fmt.Sprintf("req-%d", r), os.Getenv("WHO")); err != nil {
			return err
		}
	}
	fmt.Println("DONE")
	return nil
}

// Keys.Record writes the key once (done, with its response) after
// the effect; duplicates racing from goroutines and from other processes
// still commit exactly one effect per key and all answer with its response.
func TestIdempotencyRecord(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		auto := "id SERIAL PRIMARY KEY"
		if env.Family != "postgres" {
			auto = "id INT AUTO_INCREMENT PRIMARY KEY"
		}
		dbtest.Exec(t, db, `CREATE TABLE rec_orders (`+auto+`, request_id VARCHAR(40) NOT NULL, placed_by VARCHAR(40) NOT NULL)`)
		keys := txn.NewKeys(db, txn.KeysOptions{})
		ph := db.Dialect().Placeholder

		t.Run("first Record stores the response; a replay returns it and the duplicate effect rolls back", func(t *testing.T) {
			a, err := placeOrder(ctx, db, keys, "single", "a")
			if err != nil || a != "order by a" {
				t.Fatalf("first: %q %v", a, err)
			}
			b, err := placeOrder(ctx, db, keys, "single", "b")
			if err != nil || b != "order by a" {
				t.Fatalf("replay: %q %v, want the stored response", b, err)
			}
			if n := dbtest.Count(t, db, `SELECT count(*) FROM rec_orders WHERE request_id = `+ph(1), "single"); n != 1 {
				t.Fatalf("%d orders for one request id", n)
			}
		})
		t.Run("another fingerprint is refused", func(t *testing.T) {
			tx, _ := db.BeginTx(ctx, nil)
			defer tx.Rollback()
			if _, err := keys.Record(ctx, tx, "user-7", "single", txn.Fingerprint([]byte("DELETE /orders")), nil); !errors.Is(err, txn.ErrKeyReused) {
				t.Fatalf("%v, want ErrKeyReused", err)
			}
		})
		t.Run("a pending two-phase key is in progress", func(t *testing.T) {
			if _, err := keys.Start(ctx, "user-7", "two-phase", nil); err != nil {
				t.Fatal(err)
			}
			tx, _ := db.BeginTx(ctx, nil)
			defer tx.Rollback()
			if _, err := keys.Record(ctx, tx, "user-7", "two-phase", nil, nil); !errors.Is(err, txn.ErrInProgress) {
				t.Fatalf("%v, want ErrInProgress", err)
			}
		})
		t.Run("invalid keys", func(t *testing.T) {
			tx, _ := db.BeginTx(ctx, nil)
			defer tx.Rollback()
			for _, k := range []string{"", "a\x00b", "\xff", "trailing "} {
				_, err := keys.Record(ctx, tx, "user-7", k, nil, nil)
				if k == "trailing " {
					if err != nil {
						t.Errorf("key %q: %v (trailing spaces are distinct keys)", k, err)
					}
					continue
				}
				if !errors.Is(err, txn.ErrInvalidKey) {
					t.Errorf("key %q: %v, want ErrInvalidKey", k, err)
				}
			}
		})
		t.Run("duplicates from 8 goroutines and 3 processes: one effect per key", func(t *testing.T) {
			const rounds = 40
			var procs []*dbtest.Proc
			startAt := time.Now().Add(3 * time.Second)
			for i := 0; i < 3; i++ {
				p := dbtest.Spawn(t, "recorder", "DSN="+env.DSN, "ROUNDS="+strconv.Itoa(rounds), fmt.Sprintf("WHO=proc-%d", i),
					"START_AT="+strconv.FormatInt(startAt.UnixMilli(), 10))
				p.WaitLine(t, "READY", 30*time.Second)
				procs = append(procs, p)
			}
			time.Sleep(time.Until(startAt))
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < rounds; r++ {
						if _, err := placeOrder(ctx, db, keys, fmt.Sprintf("req-%d", r), fmt.Sprintf("goroutine-%d", g)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for _, p := range procs {
				p.WaitLine(t, "DONE", 60*time.Second)
			}
			for r := 0; r < rounds; r++ {
				id := fmt.Sprintf("req-%d", r)
				if n := dbtest.Count(t, db, `SELECT count(*) FROM rec_orders WHERE request_id = `+ph(1), id); n != 1 {
					t.Fatalf("%s: %d orders committed, want exactly 1", id, n)
				}
			}
		})
	})
}
