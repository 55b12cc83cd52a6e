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

	"github.com/sqlcoord/sqlcoord/metrics"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func TestDoRetriesDeadlock(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE acct (id INT PRIMARY KEY, v INT NOT NULL)`)
		dbtest.Exec(t, db, `INSERT INTO acct VALUES (1, 0), (2, 0)`)
		ph := db.Dialect().Placeholder
		var both sync.WaitGroup
		both.Add(2)
		var retries atomic.Int64
		var deadlocks atomic.Int64
		run := func(first, second int) error {
			attempt := 0
			return txn.Do(ctx, db, txn.Options{MaxAttempts: 10, OnRetry: func(_ int, err error) {
				retries.Add(1)
				if errors.Is(err, sqlcoord.ErrDeadlock) {
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
	t.Parallel()
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
		if !errors.Is(err, sqlcoord.ErrDuplicate) || calls != 1 {
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
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY)`)
		rec := &unknownRec{} // sqlcoord_txn_commit_unknown_total{resolved}
		proxy, viaDB := dbtest.OpenVia(t, env, sqlcoord.Options{Metrics: rec})
		ph := viaDB.Dialect().Placeholder
		n := 0
		for _, tc := range []struct {
			name         string
			forward      bool
			verify       string // "", "marker", "func"
			wantErr      error
			wantCount    int
			wantResolved string
		}{
			{"committed, no verification", true, "", sqlcoord.ErrCommitUnknown, 1, "unknown"},
			{"not committed, no verification", false, "", sqlcoord.ErrCommitUnknown, 0, "unknown"},
			{"committed, marker", true, "marker", nil, 1, "committed"},
			{"not committed, marker (retried)", false, "marker", nil, 1, "not_committed"},
			{"committed, verify func", true, "func", nil, 1, "committed"},
			{"not committed, verify func (retried)", false, "func", nil, 1, "not_committed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n++
				id := fmt.Sprintf("order-%d", n)
				opts := txn.Options{}
				switch tc.verify {
				case "marker":
					opts.CommitMarker = "commit-" + id
				case "func":
					opts.Verify = func(ctx context.Context, db dialects.Executor) (bool, error) {
						var c int
						err := db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = `+ph(1), id).Scan(&c)
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
				if got := rec.last(); got != tc.wantResolved {
					t.Errorf("commit-unknown metric resolved %q, want %q", got, tc.wantResolved)
				}
				// the truth, read directly from the server
				time.Sleep(100 * time.Millisecond)
				if got := dbtest.Count(t, env.DB, `SELECT count(*) FROM orders WHERE id = `+env.DB.Dialect().Placeholder(1), id); got != tc.wantCount {
					t.Fatalf("order rows %d, want %d (attempts %d, err %v)", got, tc.wantCount, attempts, err)
				}
			})
		}
	})
}

// With verification on, a COMMIT whose reply is lost must never
// lead to a second effect or a false error, even when the COMMIT is still in
// flight on the server while Do checks. The proxy cuts a third of all
// COMMITs at random (never sent / sent at once / sent up to 80 ms later)
// under 16 concurrent callers; every call must return nil with exactly one
// row written.
func TestDoVerifyCommitInFlight(t *testing.T) {
	t.Parallel()
	calls := 800
	if testing.Short() {
		calls = 200
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE flight (id VARCHAR(40) NOT NULL)`)
		proxy, viaDB := dbtest.OpenVia(t, env, sqlcoord.Options{MaxOpenConns: 32})
		ph := viaDB.Dialect().Placeholder
		cuts := proxy.CutCommits(0.33, 80*time.Millisecond)
		var (
			mu     sync.Mutex
			errs   []string
			next   atomic.Int64
			wg     sync.WaitGroup
			prefix = fmt.Sprintf("f%d-", time.Now().UnixNano())
		)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(calls) {
						return
					}
					id := fmt.Sprintf("%s%d", prefix, i)
					opts := txn.Options{MaxAttempts: 20, BaseBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
					if i%2 == 0 {
						opts.CommitMarker = "m-" + id
					} else {
						opts.Verify = func(ctx context.Context, db dialects.Executor) (bool, error) {
							var c int
							err := db.QueryRow(ctx, `SELECT count(*) FROM flight WHERE id = `+ph(1), id).Scan(&c)
							return c == 1, err
						}
					}
					err := txn.Do(ctx, viaDB, opts, func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, `INSERT INTO flight (id) VALUES (`+ph(1)+`)`, id)
						return err
					})
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%s: %v", id, err))
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		proxy.CutCommits(0, 0)
		// No unique index on flight: a second run of fn shows as a double.
		p1 := env.DB.Dialect().Placeholder(1)
		rows := dbtest.Count(t, env.DB, `SELECT count(*) FROM flight WHERE id LIKE `+p1, prefix+"%")
		doubles := dbtest.Count(t, env.DB, `SELECT count(*) FROM (SELECT id FROM flight WHERE id LIKE `+p1+` GROUP BY id HAVING count(*) > 1) d`, prefix+"%")
		t.Logf("%d calls, %d COMMITs cut, %d rows, %d ids written twice, %d errors", calls, cuts(), rows, doubles, len(errs))
		if len(errs) > 0 || rows != calls || doubles > 0 {
			for i, e := range errs {
				if i == 10 {
					break
				}
				t.Log(e)
			}
			t.Fatalf("%d errors, %d doubles and %d rows for %d calls; want 0 errors, 0 doubles, %d rows", len(errs), doubles, rows, calls, calls)
		}
	})
}

// unknownRec records the last TxnCommitUnknown resolution.
type unknownRec struct {
	metrics.Nop
	mu       sync.Mutex
	resolved string
}

func (r *unknownRec) TxnCommitUnknown(_, resolved string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolved = resolved
}

func (r *unknownRec) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.resolved
	r.resolved = ""
	return s
}
