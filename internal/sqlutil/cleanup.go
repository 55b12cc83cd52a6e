// Package sqlutil holds small helpers shared by sqlcoord's packages.
package sqlutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord"
)

// ErrNegativeAge is returned for a negative retention age.
var ErrNegativeAge = errors.New("sqlcoord: cleanup age is negative")

// DeleteInBatches runs q (a DELETE taking an age in µs and a row limit)
// until it deletes fewer than batch rows, so that no statement holds many
// row locks or blocks concurrent inserts. It returns the rows deleted.
func DeleteInBatches(ctx context.Context, db sqlcoord.Base, q string, age time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	if age < 0 {
		return 0, ErrNegativeAge
	}
	var total int64
	for {
		n, err := db.Executor().Exec(ctx, q, age.Microseconds(), batch)
		if err != nil {
			return total, fmt.Errorf("sqlcoord: cleanup: %w", db.Dialect().Classify(err))
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
