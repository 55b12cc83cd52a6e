package dialects

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Partitioner is how a dialect keeps coord_outbox in id-range partitions
// and drops its old history whole — no row deletes, so no dead tuples for
// VACUUM and no purge work for InnoDB (package partitions is the API;
// docs/retention.md the guarantee). Each method runs DDL: x runs
// autocommit statements (a pool), begin starts a transaction on a
// connection of its own.
//
// The contract every implementation keeps:
//   - Partition converts an existing coord_outbox online: producers and
//     relays wait at most for one short lock, no message is lost, the
//     pending ones keep their ids (and so their order), the sequence of
//     ids continues past every id issued before.
//   - Extend never leaves an issued id without a place: a catch-all
//     partition (PostgreSQL's DEFAULT, MariaDB's MAXVALUE) takes what no
//     range covers, so a producer never fails for want of a partition.
//   - Drop drops a partition only if, checked under a lock that keeps
//     anything from writing into it (PostgreSQL), or by a locking read
//     that waits for every uncommitted row in it (MySQL family), every id
//     of its range has been issued and every row in it is a message
//     published before the cutoff: none pending, none dead-lettered.
type Partitioner interface {
	// Partitions lists coord_outbox's partitions in id order, and the
	// last id issued. ErrNotPartitioned when the table is not
	// partitioned.
	Partitions(ctx context.Context, x Executor) (Layout, error)
	// Partition converts an unpartitioned coord_outbox: what exists
	// stays as history (the ids issued so far), the next ids go to a
	// first partition of size ids made with ahead more after it.
	Partition(ctx context.Context, x Executor, begin Begin, size int64, ahead int) error
	// Extend adds partitions of the newest one's size until ahead of
	// them lie wholly above the last id issued; it returns their names.
	Extend(ctx context.Context, x Executor, begin Begin, ahead int) ([]string, error)
	// Drop drops p if nothing holds it (see the contract above): held
	// says why not ("" when dropped).
	Drop(ctx context.Context, x Executor, begin Begin, p Partition, before time.Duration) (held string, err error)
	// DropHistory drops the history an earlier Partition set aside as
	// a table of its own (MySQL family: coord_outbox_legacy) once its
	// newest message was published before the cutoff; held says why
	// not, "" when dropped or when there is none. Where the catch-all
	// partition keeps rows (PostgreSQL's DEFAULT, after ids outran the
	// partitions), it also deletes the ones published before the cutoff.
	DropHistory(ctx context.Context, x Executor, before time.Duration) (held string, err error)
}

// Begin starts a transaction on a connection of its own, committed or
// rolled back by the caller.
type Begin func(ctx context.Context) (OwnedTx, error)

// Layout is coord_outbox's partitioning as Partitions read it.
type Layout struct {
	Parts []Partition
	// Issued is the last id the table's sequence issued (0: none).
	Issued int64
	// History is the history set aside by Partition as a table of its
	// own ("" when none): the MySQL family's coord_outbox_legacy.
	History string
}

// Partition is one partition of coord_outbox: the ids [From, To).
type Partition struct {
	Name     string
	From, To int64 // math.MinInt64 / math.MaxInt64 where unbounded
	// CatchAll: the partition that takes ids no range covers
	// (PostgreSQL DEFAULT, MySQL family VALUES LESS THAN MAXVALUE); it
	// is never dropped.
	CatchAll bool
	// Rows is the server's estimate (statistics), not a count.
	Rows int64
}

// Size is the number of ids the partition's range holds (0 when unbounded).
func (p Partition) Size() int64 {
	if p.CatchAll || p.From == math.MinInt64 || p.To == math.MaxInt64 {
		return 0
	}
	return p.To - p.From
}

// ErrNotPartitioned: coord_outbox is a plain table (Partition makes it
// partitioned).
var ErrNotPartitioned = errors.New("sqlcoord: coord_outbox is not partitioned")

// ErrPartitioned: Partition found coord_outbox partitioned already.
var ErrPartitioned = errors.New("sqlcoord: coord_outbox is partitioned already")

// ErrPartitionBusy: a partition change could not take its lock in time
// (transactions on coord_outbox kept it); nothing changed. Safe to retry.
var ErrPartitionBusy = errors.New("sqlcoord: coord_outbox is busy: the partition change could not take its lock")

// Partitioner is the dialect's partitioning of coord_outbox, nil where the
// server cannot change partitions safely (a Galera cluster: LOCK TABLES
// is not replicated).
func (d *Dialect) Partitioner() Partitioner { return d.parts }

// partitionName is the name of coord_outbox's partition starting at from.
func partitionName(from int64) string {
	if from == math.MinInt64 {
		from = 0
	}
	return fmt.Sprintf("coord_outbox_p%d", from)
}

// extendFrom is where Extend's next partition starts (above the newest
// bounded one), its size (the newest one's; 0: no bounded partition to
// take a size from) and how many partitions lie wholly above the last id
// issued now.
func extendFrom(l Layout) (from, size int64, above int) {
	var last *Partition
	for i := range l.Parts {
		p := &l.Parts[i]
		if !p.CatchAll && p.From > l.Issued {
			above++
		}
		if !p.CatchAll && p.To != math.MaxInt64 && (last == nil || p.To > last.To) {
			last = p
		}
	}
	if last == nil {
		return 0, 0, above
	}
	return last.To, last.Size(), above
}
