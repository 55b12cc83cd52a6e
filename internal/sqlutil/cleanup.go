// Package sqlutil holds small helpers shared by sqlcoord's packages.
package sqlutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/core"
)

// Pool is what a cleanup needs of a driver (any sqlcoord.Base): its
// dialect and transactions it commits itself.
type Pool interface {
	Dialect() *dialects.Dialect
	core.Sealed
}

// Pace is how a cleanup pauses between batches: a sqlcoord.CleanupPace,
// converted (Pace(db.CleanupPace())).
type Pace struct {
	Duty float64 // share of the time spent deleting; 0 or 1: no pause for it
	Rate float64 // rows per second at most; 0: no cap
}

// ErrNegativeAge is returned for a negative retention age.
var ErrNegativeAge = errors.New("sqlcoord: cleanup age is negative")

// DeleteInBatches runs q (a DELETE taking an age in µs and a row limit)
// until it deletes fewer than batch rows (default 1,000), through InBatches.
// It returns the rows deleted.
func DeleteInBatches(ctx context.Context, db Pool, pace Pace, q string, age time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	if age < 0 {
		return 0, ErrNegativeAge
	}
	n, err := InBatches(ctx, db, pace, batch, func(ctx context.Context, x dialects.Executor) (int64, error) {
		return x.Exec(ctx, q, age.Microseconds(), batch)
	})
	if err != nil {
		return n, fmt.Errorf("sqlcoord: cleanup: %w", err)
	}
	return n, nil
}

// InBatches runs one batch of a cleanup per READ COMMITTED transaction
// until a batch deletes fewer than batch rows, so that no statement holds
// many row locks or blocks concurrent inserts: on the MySQL family,
// REPEATABLE READ would keep every row a DELETE read locked, and the gaps
// between them (the end of the table, where new rows go, among them). It
// returns the rows deleted, and an error classified by the dialect for the
// caller to name.
func InBatches(ctx context.Context, db Pool, pace Pace, batch int, one func(context.Context, dialects.Executor) (int64, error)) (int64, error) {
	var total int64
	var last time.Duration // the previous batch's duration
	var rows int64         // and the rows it deleted
	for {
		if last > 0 {
			if err := backoff.Sleep(ctx, pause(pace, last, rows)); err != nil {
				return total, err
			}
		}
		start := time.Now()
		tx, err := core.Owned(ctx, db, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return total, db.Dialect().Classify(err)
		}
		n, err := one(ctx, tx)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			tx.Rollback(ctx)
		}
		if err != nil {
			return total, db.Dialect().Classify(err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
		last, rows = time.Since(start), n
	}
}

// pause is how long a cleanup waits after a batch that took took and
// deleted rows: Options.CleanupDuty makes the batch that share of the time
// until the next one begins, Options.CleanupRate makes its rows take at
// least rows/rate seconds from its start; the longer wins. A tiny duty or
// rate gives a pause as long as a Duration holds (ctx still ends it), not
// an overflow.
func pause(p Pace, took time.Duration, rows int64) time.Duration {
	var ns float64
	if p.Duty > 0 && p.Duty < 1 {
		ns = float64(took) * (1 - p.Duty) / p.Duty
	}
	if p.Rate > 0 {
		ns = max(ns, float64(rows)/p.Rate*float64(time.Second)-float64(took))
	}
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
