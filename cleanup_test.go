package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/pgxv5"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Options.CleanupDuty: a cleanup pauses between batches so that deleting
// takes that share of its time; it still deletes everything, and ctx
// ends a paused cleanup with what it deleted committed.
func TestCleanupDuty(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"postgres", "mysql"} {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			env := dbtest.New(t, family)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			keys := txn.NewKeys(env.DB, txn.KeysOptions{})
			fill := func(n int) {
				t.Helper()
				for i := range n {
					if err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
						_, err := keys.Record(ctx, tx, "duty", fmt.Sprintf("k-%d-%d", time.Now().UnixNano(), i), nil, nil)
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			const batch, batches = 50, 4
			// pacedCleanup fills 3.5 batches and times their cleanup
			// through a driver opened with opt; it must delete them all.
			pacedCleanup := func(t *testing.T, opt sqlcoord.Options) time.Duration {
				t.Helper()
				fill(batch*batches - batch/2)
				paced, err := sqlcoord.Open(ctx, env.DSN, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer paced.Close()
				start := time.Now()
				n, err := txn.NewKeys(paced, txn.KeysOptions{}).Cleanup(ctx, 0, batch)
				took := time.Since(start)
				if err != nil || n != batch*batches-batch/2 {
					t.Fatalf("paced cleanup (%+v): %d rows, %v", opt, n, err)
				}
				return took
			}
			t.Run("paced cleanup takes longer and deletes everything", func(t *testing.T) {
				// unpaced: the same rows' cost (the faster of two runs, so
				// that one stalled run cannot lower the bar below)
				unpaced := time.Hour
				for range 2 {
					fill(batch*batches - batch/2)
					start := time.Now()
					n, err := keys.Cleanup(ctx, 0, batch)
					unpaced = min(unpaced, time.Since(start))
					if err != nil || n != batch*batches-batch/2 {
						t.Fatalf("unpaced cleanup: %d rows, %v", n, err)
					}
				}
				took := pacedCleanup(t, sqlcoord.Options{CleanupDuty: 0.01})
				// 3 pauses of 99× a batch each: far beyond 10× the
				// whole unpaced cleanup, whatever the machine's noise.
				t.Logf("unpaced %v, paced (duty 0.01) %v", unpaced, took)
				if took < 10*unpaced {
					t.Fatalf("cleanup with CleanupDuty 0.01 took %v, unpaced %v: it did not pause", took, unpaced)
				}
			})
			t.Run("CleanupRate caps the rows per second", func(t *testing.T) {
				// 50-row batches at 100 rows/s: each full batch spans at
				// least 0.5 s, and three full batches come before the
				// last, short one — 1.5 s at least, whatever the machine
				// (unpaced, the same rows take tens of milliseconds).
				took := pacedCleanup(t, sqlcoord.Options{CleanupRate: 100})
				t.Logf("175 rows at CleanupRate 100: %v", took)
				if took < 1400*time.Millisecond {
					t.Fatalf("175 rows at CleanupRate 100 rows/s took %v: faster than the cap", took)
				}
			})
			t.Run("ctx ends a paused cleanup, keeping what it deleted", func(t *testing.T) {
				fill(batch * batches)
				paced, err := sqlcoord.Open(ctx, env.DSN, sqlcoord.Options{CleanupDuty: 0.0001})
				if err != nil {
					t.Fatal(err)
				}
				defer paced.Close()
				short, stop := context.WithTimeout(ctx, 2*time.Second)
				defer stop()
				n, err := txn.NewKeys(paced, txn.KeysOptions{}).Cleanup(short, 0, batch)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("paused cleanup past its deadline: %d rows, %v; want the deadline", n, err)
				}
				left := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_idempotency WHERE scope = 'duty'`)
				if n < batch || int64(left) != int64(batch*batches)-n {
					t.Fatalf("cancelled cleanup reported %d rows deleted, %d of %d left", n, left, batch*batches)
				}
				if n, err := keys.Cleanup(ctx, 0, batch); err != nil || n != int64(left) {
					t.Fatalf("the rest: %d rows, %v; want %d", n, err, left)
				}
			})
		})
	}
	t.Run("out of range is refused", func(t *testing.T) {
		env := dbtest.New(t, "postgres")
		ctx := context.Background()
		bad := []sqlcoord.Options{}
		for _, d := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
			bad = append(bad, sqlcoord.Options{CleanupDuty: d})
		}
		for _, r := range []float64{-1, math.NaN(), math.Inf(1)} {
			bad = append(bad, sqlcoord.Options{CleanupRate: r})
		}
		for _, o := range bad {
			what := fmt.Sprintf("CleanupDuty %v, CleanupRate %v", o.CleanupDuty, o.CleanupRate)
			if db, err := sqlcoord.Open(ctx, env.DSN, o); !errors.Is(err, sqlcoord.ErrInvalidOptions) {
				if db != nil {
					db.Close()
				}
				t.Errorf("Open with %s: %v, want ErrInvalidOptions", what, err)
			}
			if _, err := sqlcoord.WrapDB(ctx, env.DB.DB, o); !errors.Is(err, sqlcoord.ErrInvalidOptions) {
				t.Errorf("WrapDB with %s: %v, want ErrInvalidOptions", what, err)
			}
			pool, err := pgxpool.New(ctx, env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pgxv5.Wrap(ctx, pool, o); !errors.Is(err, sqlcoord.ErrInvalidOptions) {
				t.Errorf("pgxv5.Wrap with %s: %v, want ErrInvalidOptions", what, err)
			}
			pool.Close()
		}
	})
}
