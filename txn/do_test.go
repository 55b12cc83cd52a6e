package txn_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func TestDoRetriesDeadlock(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE acct (id INT PRIMARY KEY, v INT NOT NULL)`)
		dbtest.Exec(t, db, `INSERT INTO acct VALUES (1, 0), (2, 0)`)
		ph := db.Dialect.Placeholder
		var both sync.WaitGroup
		both.Add(2)
		var retries atomic.Int64
		var deadlocks atomic.Int64
		run := func(first, second int) error {
			attempt := 0
			return txn.Do(ctx, db, txn.Options{MaxAttempts: 10, OnRetry: func(_ int, err error) {
				retries.Add(1)
				if errors.Is(err, dialects.ErrDeadlock) {
					deadlocks.Add(1)
				}
			}}, func(ctx context.Context, tx *sql.Tx) error {
				attempt++
				if _, err := tx.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = `+ph(1), first); err != nil {
					return err
				}
				if attempt == 1 {
					both.Done()
					both.Wait() // both hold their first row: a real deadlock follows
				}
				_, err := tx.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = `+ph(1), second)
				return err
			})
		}
		errs := make(chan error, 2)
		go func() { errs <- run(1, 2) }()
		go func() { errs <- run(2, 1) }()
		for i := 0; i < 2; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if deadlocks.Load() == 0 {
			t.Fatalf("no deadlock was retried (retries %d)", retries.Load())
		}
		if got := dbtest.Count(t, db, `SELECT SUM(v) FROM acct`); got != 4 {
			t.Fatalf("sum %d, want 4 (each transaction applied exactly once)", got)
		}
	})
}

func TestDoNonRetryableAndPanic(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE items (id INT PRIMARY KEY)`)
		dbtest.Exec(t, db, `INSERT INTO items VALUES (1)`)
		calls := 0
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			calls++
			_, err := tx.ExecContext(ctx, `INSERT INTO items VALUES (1)`)
			return err
		})
		if !errors.Is(err, dialects.ErrDuplicate) || calls != 1 {
			t.Fatalf("duplicate: %v after %d calls", err, calls)
		}
		mine := errors.New("business rule")
		calls = 0
		err = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			calls++
			tx.ExecContext(ctx, `INSERT INTO items VALUES (2)`)
			return mine
		})
		if !errors.Is(err, mine) || calls != 1 || dbtest.Count(t, db, `SELECT count(*) FROM items`) != 1 {
			t.Fatalf("own error: %v, %d calls", err, calls)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("panic swallowed")
				}
			}()
			txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				tx.ExecContext(ctx, `INSERT INTO items VALUES (3)`)
				panic("boom")
			})
		}()
		if n := dbtest.Count(t, db, `SELECT count(*) FROM items`); n != 1 {
			t.Fatalf("panic did not roll back: %d rows", n)
		}
		// context cancellation stops retries
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := txn.Do(cctx, db, txn.Options{}, func(context.Context, *sql.Tx) error { return nil }); err == nil {
			t.Fatal("cancelled context: no error")
		}
	})
}

// A real TCP proxy cuts the connection right after COMMIT is sent (the
// server commits, the client never hears) or instead of sending it.
func TestCommitOutcomeUnknown(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY)`)
		proxy := dbtest.ProxyFor(t, env)
		viaDB, err := sqlcoord.Open(ctx, proxy.Via(env))
		if err != nil {
			t.Fatal(err)
		}
		defer viaDB.Close()
		ph := viaDB.Dialect.Placeholder
		n := 0
		for _, tc := range []struct {
			name      string
			forward   bool
			verify    string // "", "marker", "func"
			wantErr   error
			wantCount int
		}{
			{"committed, no verification", true, "", dialects.ErrCommitUnknown, 1},
			{"not committed, no verification", false, "", dialects.ErrCommitUnknown, 0},
			{"committed, marker", true, "marker", nil, 1},
			{"not committed, marker (retried)", false, "marker", nil, 1},
			{"committed, verify func", true, "func", nil, 1},
			{"not committed, verify func (retried)", false, "func", nil, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n++
				id := fmt.Sprintf("order-%d", n)
				opts := txn.Options{}
				switch tc.verify {
				case "marker":
					opts.CommitMarker = "commit-" + id
				case "func":
					opts.Verify = func(ctx context.Context, db *sqlcoord.DB) (bool, error) {
						var c int
						err := db.QueryRowContext(ctx, `SELECT count(*) FROM orders WHERE id = `+ph(1), id).Scan(&c)
						return c == 1, err
					}
				}
				var fired <-chan struct{}
				attempts := 0
				err := txn.Do(ctx, viaDB, opts, func(ctx context.Context, tx *sql.Tx) error {
					attempts++
					if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (`+ph(1)+`)`, id); err != nil {
						return err
					}
					if attempts == 1 {
						fired = proxy.ArmCommitCut(tc.forward)
					}
					return nil
				})
				select {
				case <-fired:
				case <-time.After(5 * time.Second):
					t.Fatal("the proxy never saw COMMIT")
				}
				if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("Do: %v, want %v", err, tc.wantErr)
				}
				// the truth, read directly from the server
				time.Sleep(100 * time.Millisecond)
				if got := dbtest.Count(t, env.DB, `SELECT count(*) FROM orders WHERE id = `+env.DB.Dialect.Placeholder(1), id); got != tc.wantCount {
					t.Fatalf("order rows %d, want %d (attempts %d, err %v)", got, tc.wantCount, attempts, err)
				}
			})
		}
	})
}
