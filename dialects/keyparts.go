package dialects

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// KeyPartitioner is how a dialect keeps coord_idempotency in partitions of
// one period each and drops them whole (package partitions is the API;
// docs/retention.md, "Idempotency keys by period", the guarantee).
//
// A key of a partitioned table is a row in each period it claims: the
// period its claim ran in (by the server's clock) and the next one, and
// period 0 as well while the keys written before the switch are still
// protected (their rows have period 0). The primary key (scope, idem_key,
// period) holds in every partition, so two claims of one key less than a
// period apart meet on a shared period; the claims themselves are the
// dialect's IdemInsert and IdemInsertDone, which read coord_periods.
//
// The contract every implementation keeps:
//   - PartitionKeys converts an unpartitioned coord_idempotency online:
//     requests wait at most for one short lock, no key is lost, and
//     every key written before the switch keeps its protection (its
//     period-0 row, met by every claim until LegacyUntil).
//   - A claim never fails for want of a partition: a catch-all takes
//     periods no range covers.
//   - DropKeys drops a partition, under a lock that waits for every
//     transaction using it; package partitions asks only for partitions
//     whose periods no claim can meet any more (KeyLayout.Droppable).
type KeyPartitioner interface {
	// KeyPartitions lists coord_idempotency's partitions in period
	// order, the period length and the period now by the server's
	// clock. ErrKeysNotPartitioned when the table is not partitioned.
	KeyPartitions(ctx context.Context, x Executor) (KeyLayout, error)
	// PartitionKeys converts an unpartitioned coord_idempotency into
	// partitions of period each, made for the current period and ahead
	// more; the keys already there go to the legacy partition (periods
	// below 1).
	PartitionKeys(ctx context.Context, x Executor, begin Begin, period time.Duration, ahead int) error
	// ExtendKeys makes partitions until ahead of them lie after the
	// current period; it returns their names.
	ExtendKeys(ctx context.Context, x Executor, begin Begin, ahead int) ([]string, error)
	// DropKeys drops the partition p.
	DropKeys(ctx context.Context, x Executor, begin Begin, p Partition) error
	// PurgeKeys deletes, in batches, the rows of periods before the
	// current one that the catch-all partition holds (only there when
	// partitions were not made ahead in time; PostgreSQL's DEFAULT).
	PurgeKeys(ctx context.Context, x Executor) (int64, error)
}

// KeyLayout is coord_idempotency's partitioning by period.
type KeyLayout struct {
	// Parts are the partitions in period order: From and To are periods
	// (To excluded), the legacy partition (the keys written before the
	// switch) from math.MinInt64 to 1, the catch-all last.
	Parts []Partition
	// Period is a period's length.
	Period time.Duration
	// Current is the period now by the server's clock.
	Current int64
	// LegacyUntil is the last period in which a claim also claims period
	// 0 (the legacy partition's keys are protected until it ends).
	LegacyUntil int64
}

// Droppable says whether no claim can meet a row of p any more: every
// period it holds lies before the current one (claims are made in the
// current period and the next), and for the legacy partition, period 0
// is no longer claimed. The catch-all is never dropped.
func (l KeyLayout) Droppable(p Partition) bool {
	if p.CatchAll {
		return false
	}
	if p.From == math.MinInt64 {
		return l.Current > l.LegacyUntil && p.To <= l.Current
	}
	return p.To <= l.Current
}

// ErrKeysNotPartitioned: coord_idempotency is a plain table.
var ErrKeysNotPartitioned = errors.New("sqlcoord: coord_idempotency is not partitioned")

// ErrKeysPartitioned: PartitionKeys found coord_idempotency partitioned
// already.
var ErrKeysPartitioned = errors.New("sqlcoord: coord_idempotency is partitioned already")

// KeyPartitioner is the dialect's partitioning of coord_idempotency, nil
// where it is not offered (MySQL 8, Galera).
func (d *Dialect) KeyPartitioner() KeyPartitioner { return d.keyParts }

// keyPartName is the name of coord_idempotency's partition whose last
// period is last (0: the legacy partition).
func keyPartName(last int64) string {
	return fmt.Sprintf("coord_idempotency_p%d", max(last, 0))
}
