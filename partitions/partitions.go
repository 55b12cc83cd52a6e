// Package partitions keeps the outbox's history in id-range partitions and
// drops it a partition at a time: no row is deleted, so retention leaves no
// dead tuples for VACUUM and no purge work for InnoDB, however many
// messages a day the outbox carries (docs/retention.md, "Partitions").
//
// Enable converts an installed coord_outbox, online (opt-in: an outbox
// without it keeps its row-by-row Cleanup). Roll, run every few minutes
// (`sqlcoord partitions roll` from cron, or a goroutine of the relay's
// process), makes partitions ahead of the ids and drops each partition in
// which every message was published longer ago than its retention age.
//
// What it guarantees:
//   - No message is lost: a partition is dropped only if, checked where
//     nothing can write into it, every id of its range was issued and
//     every row in it is a message published before the cutoff — one
//     pending or dead-lettered message keeps its partition (Status says
//     which and why).
//   - Producers never fail for want of a partition: ids no range covers
//     go to a catch-all partition (PostgreSQL DEFAULT, MariaDB MAXVALUE).
//   - A message id chosen by the caller (outbox.Msg.ID) stays unique
//     across partitions: Enqueue records it in coord_outbox_ids, whose
//     primary key refuses it a second time until Roll (or
//     Outbox.Cleanup) forgets it after the retention age. Ids Enqueue
//     generates are UUIDv7s, unique by construction.
//
// EnableKeys and RollKeys do the same for the idempotency keys, a
// partition per period: a key is written into the period of its claim and
// the next one, so that any two claims of it less than a period apart meet
// on the primary key (docs/retention.md, "Idempotency keys by period").
//
// What it does not cover: partitions of the inbox, job runs, commit
// markers and saga records (their cleanups stay row by row); MySQL 8
// (Debian ships no server to test it on) and Galera clusters (LOCK TABLES
// is not replicated): ErrUnsupported.
package partitions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
)

// Layout is coord_outbox's partitioning: its partitions in id order, the
// last id issued, and the history Enable set aside as a table of its own
// (MariaDB).
type Layout = dialects.Layout

// Partition is one partition: the ids [From, To).
type Partition = dialects.Partition

var (
	// ErrNotPartitioned: coord_outbox is a plain table (see Enable).
	ErrNotPartitioned = dialects.ErrNotPartitioned
	// ErrPartitioned: Enable found coord_outbox partitioned already.
	ErrPartitioned = dialects.ErrPartitioned
	// ErrBusy: transactions on coord_outbox kept a partition change from
	// its lock, each of the times it tried; nothing changed. Safe to
	// retry later.
	ErrBusy = dialects.ErrPartitionBusy
	// ErrUnsupported: the server's dialect cannot partition coord_outbox
	// safely (MySQL 8, Galera).
	ErrUnsupported = errors.New("sqlcoord: partitioned outbox not supported on this server")
	// ErrInvalid: an option out of range.
	ErrInvalid = sqlcoord.ErrInvalidOptions
)

// Options shape the partitions Enable and Roll make.
type Options struct {
	// Size is the number of ids in a partition: about the messages one
	// period carries (10,000 messages/s for an hour: 36,000,000). The
	// smallest unit retention drops. Default 1,000,000.
	Size int64
	// Ahead is how many partitions are kept wholly above the last id
	// issued, so that producers run into a made partition while Roll is
	// not running. Default 2.
	Ahead int
}

func (o *Options) defaults() error {
	if o.Size == 0 {
		o.Size = 1_000_000
	}
	if o.Ahead == 0 {
		o.Ahead = 2
	}
	if o.Size < 1000 || o.Size > 1<<50 {
		return errs.Errorf("%w: partition size %d: want 1,000 to 2^50 ids", ErrInvalid, o.Size)
	}
	if o.Ahead < 1 || o.Ahead > 100 {
		return errs.Errorf("%w: ahead %d: want 1 to 100 partitions", ErrInvalid, o.Ahead)
	}
	return nil
}

func partitioner(db sqlcoord.Base) (dialects.Partitioner, error) {
	p := db.Dialect().Partitioner()
	if p == nil {
		return nil, errs.Errorf("%w (%s)", ErrUnsupported, db.Dialect().Name())
	}
	return p, nil
}

func begin(db sqlcoord.Base) dialects.Begin {
	return func(ctx context.Context) (dialects.OwnedTx, error) { return core.Owned(ctx, db, nil) }
}

// busyRetry is how long a partition change keeps trying for its lock:
// each try waits at most a moment (producers queue behind a waiting DDL
// statement), the tries back off.
var busyRetry = backoff.Policy{Base: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: backoff.Full}

const busyTries = 12

// retry runs fn until it does not fail with ErrBusy, busyTries times.
func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	var v T
	err := busyRetry.Retry(ctx, busyTries, func(err error) bool { return errors.Is(err, ErrBusy) }, func() (err error) {
		v, err = fn()
		return err
	})
	return v, err
}

// Enable converts an unpartitioned coord_outbox (schema 28 or later) into
// a partitioned one, online: the messages already there stay as history
// (PostgreSQL: a partition holding the ids issued so far; MariaDB: pending
// and dead messages move into the new table with their ids, the published
// history stays beside it as coord_outbox_legacy until Roll drops it
// whole), and the next ids go to partitions of o.Size made ahead.
//
// Cost (docs/retention.md has the figures): PostgreSQL builds two indexes
// without blocking writers and validates the history's id range with a
// scan that does not block them either, then switches in one transaction
// under one lock of milliseconds; MariaDB holds coord_outbox under LOCK
// TABLES while it copies the backlog (messages not published yet) —
// producers wait that long. Enable run again after it succeeded returns
// ErrPartitioned. Run it once every instance runs this release: an older
// one's Enqueue does not record caller-chosen ids in coord_outbox_ids.
func Enable(ctx context.Context, db sqlcoord.Base, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	p, err := partitioner(db)
	if err != nil {
		return err
	}
	_, err = retry(ctx, func() (struct{}, error) {
		return struct{}{}, p.Partition(ctx, db.Executor(), begin(db), o.Size, o.Ahead)
	})
	if err != nil {
		return errs.Errorf("partitions: enable: %w", err)
	}
	return nil
}

// Status reads coord_outbox's partitioning (ErrNotPartitioned when it
// has none).
func Status(ctx context.Context, db sqlcoord.Base) (Layout, error) {
	p, err := partitioner(db)
	if err != nil {
		return Layout{}, err
	}
	l, err := p.Partitions(ctx, db.Executor())
	if err != nil {
		return Layout{}, errs.Errorf("partitions: status: %w", err)
	}
	return l, nil
}

// RollOptions says what Roll keeps.
type RollOptions struct {
	// OlderThan is the retention age: a partition is dropped once every
	// message in it was published longer ago than this. Required (no
	// default: what it drops is gone), above 0.
	OlderThan time.Duration
	// Ahead: as Options.Ahead (default 2).
	Ahead int
}

// Held is a partition Roll kept, and why.
type Held struct {
	Partition string `json:"partition"`
	Reason    string `json:"reason"`
}

// RollResult is what one Roll did.
type RollResult struct {
	Created []string // partitions made ahead
	Dropped []string // partitions (or the history table) dropped
	Held    []Held   // old partitions kept, each with its reason
	// IDsForgotten is how many caller-chosen message ids older than the
	// retention age were deleted from coord_outbox_ids.
	IDsForgotten int64
}

// Roll makes partitions ahead of the ids and drops every partition (and
// MariaDB's history table) in which all messages were published longer
// ago than o.OlderThan, then forgets caller-chosen message ids older than
// that. Each step takes its lock for a moment only and tries again while
// coord_outbox is busy (ErrBusy after a few seconds of trying); what a
// step did stays done when a later one fails. Safe to run from several
// processes at once: a partition already made or dropped by another is
// skipped at the next Roll.
func Roll(ctx context.Context, db sqlcoord.Base, o RollOptions) (RollResult, error) {
	var res RollResult
	if o.OlderThan <= 0 {
		return res, errs.Errorf("%w: retention age %v: want a duration above 0", ErrInvalid, o.OlderThan)
	}
	opt := Options{Size: 1000, Ahead: o.Ahead} // Size is read off the partitions
	if err := opt.defaults(); err != nil {
		return res, err
	}
	p, err := partitioner(db)
	if err != nil {
		return res, err
	}
	x := db.Executor()
	res.Created, err = retry(ctx, func() ([]string, error) { return p.Extend(ctx, x, begin(db), opt.Ahead) })
	if err != nil {
		return res, errs.Errorf("partitions: roll: make ahead: %w", err)
	}
	l, err := p.Partitions(ctx, x)
	if err != nil {
		return res, errs.Errorf("partitions: roll: %w", err)
	}
	for _, part := range l.Parts {
		if part.CatchAll || part.From > l.Issued {
			continue // the ids ahead, and the catch-all: never dropped
		}
		held, err := retry(ctx, func() (string, error) { return p.Drop(ctx, x, begin(db), part, o.OlderThan) })
		if err != nil {
			return res, errs.Errorf("partitions: roll: drop %s: %w", part.Name, err)
		}
		if held != "" {
			res.Held = append(res.Held, Held{part.Name, held})
			continue
		}
		res.Dropped = append(res.Dropped, part.Name)
	}
	held, err := p.DropHistory(ctx, x, o.OlderThan)
	switch {
	case err != nil:
		return res, errs.Errorf("partitions: roll: history: %w", err)
	case l.History == "":
	case held != "":
		res.Held = append(res.Held, Held{l.History, held})
	default:
		res.Dropped = append(res.Dropped, l.History)
	}
	res.IDsForgotten, err = sqlutil.DeleteInBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), db.Dialect().Q().OutboxIDCleanup, o.OlderThan, 1000)
	if err != nil {
		return res, errs.Errorf("partitions: roll: forget chosen message ids: %w", err)
	}
	return res, nil
}

// String is a one-line account of a Roll.
func (r RollResult) String() string {
	return fmt.Sprintf("%d made ahead, %d dropped, %d kept, %d chosen ids forgotten", len(r.Created), len(r.Dropped), len(r.Held), r.IDsForgotten)
}

// KeysLayout is coord_idempotency's partitioning by period: its
// partitions (From and To are periods), the period's length, the period
// now by the server's clock, and the last period in which claims also
// meet the keys written before the switch.
type KeysLayout = dialects.KeyLayout

var (
	// ErrKeysNotPartitioned: coord_idempotency is a plain table (see
	// EnableKeys).
	ErrKeysNotPartitioned = dialects.ErrKeysNotPartitioned
	// ErrKeysPartitioned: EnableKeys found coord_idempotency partitioned
	// already.
	ErrKeysPartitioned = dialects.ErrKeysPartitioned
)

// KeysOptions shape the partitions EnableKeys and RollKeys make.
type KeysOptions struct {
	// Period is a partition's span of time and the keys' protection: a
	// key is refused or replayed for at least one Period after its
	// first use, and forgotten at most two Periods after it. Choose it
	// above the clients' retry horizon and Keys' LockFor (a pending key
	// is forgotten like a done one). Required: 1 s to 366 days.
	Period time.Duration
	// Ahead is how many partitions are kept after the current period.
	// Default 2.
	Ahead int
}

func (o *KeysOptions) defaults(needPeriod bool) error {
	if o.Ahead == 0 {
		o.Ahead = 2
	}
	if o.Ahead < 1 || o.Ahead > 100 {
		return errs.Errorf("%w: ahead %d: want 1 to 100 partitions", ErrInvalid, o.Ahead)
	}
	if needPeriod && (o.Period < time.Second || o.Period > 366*24*time.Hour) {
		return errs.Errorf("%w: key period %v: want 1s to 366 days", ErrInvalid, o.Period)
	}
	return nil
}

func keyPartitioner(db sqlcoord.Base) (dialects.KeyPartitioner, error) {
	p := db.Dialect().KeyPartitioner()
	if p == nil {
		return nil, errs.Errorf("%w (%s)", ErrUnsupported, db.Dialect().Name())
	}
	return p, nil
}

// EnableKeys converts an unpartitioned coord_idempotency (schema 29 or
// later) into partitions of o.Period each, online. From then on a key is a
// row in each period it claims — the period of its claim and the next one,
// by the server's clock — so that the primary key (scope, idem_key,
// period), which every partition enforces, makes two claims of one key
// less than a period apart meet; a partition is dropped whole once no
// claim can meet its rows (RollKeys). The keys already there keep their
// protection: they become the legacy partition, and until the end of the
// period after the switch every claim also claims their period (0).
//
// Cost (docs/retention.md): PostgreSQL builds a unique index and
// validates a check without blocking writers, then switches under one
// lock of milliseconds; MariaDB copies the table beside it (triggers
// mirror the changes meanwhile; requests wait only for the copy's locks
// on the rows they touch) and swaps the two with one RENAME. Every claim
// then writes two rows (three during the first periods). Run it once
// every instance runs this release: an older one's claim fails on the
// partitioned table (its ON CONFLICT names a key the table no longer
// has; on MariaDB it would write period 0 only).
func EnableKeys(ctx context.Context, db sqlcoord.Base, o KeysOptions) error {
	if err := o.defaults(true); err != nil {
		return err
	}
	p, err := keyPartitioner(db)
	if err != nil {
		return err
	}
	_, err = retry(ctx, func() (struct{}, error) {
		return struct{}{}, p.PartitionKeys(ctx, db.Executor(), begin(db), o.Period, o.Ahead)
	})
	if err != nil {
		return errs.Errorf("partitions: enable keys: %w", err)
	}
	return nil
}

// KeysStatus reads coord_idempotency's partitioning
// (ErrKeysNotPartitioned when it has none).
func KeysStatus(ctx context.Context, db sqlcoord.Base) (KeysLayout, error) {
	p, err := keyPartitioner(db)
	if err != nil {
		return KeysLayout{}, err
	}
	l, err := p.KeyPartitions(ctx, db.Executor())
	if err != nil {
		return KeysLayout{}, errs.Errorf("partitions: keys status: %w", err)
	}
	return l, nil
}

// RollKeys makes partitions for the periods ahead and drops every
// partition no claim can meet any more: all its periods lie before the
// current one (and, for the legacy partition, period 0 is no longer
// claimed). Dropping waits for the transactions using the table, a moment
// at a time (ErrBusy after a few seconds of trying). Keys' row-by-row
// Cleanup is not needed on a partitioned table. Safe to run from several
// processes at once.
func RollKeys(ctx context.Context, db sqlcoord.Base, o KeysOptions) (RollResult, error) {
	var res RollResult
	if err := o.defaults(false); err != nil {
		return res, err
	}
	p, err := keyPartitioner(db)
	if err != nil {
		return res, err
	}
	x := db.Executor()
	res.Created, err = retry(ctx, func() ([]string, error) { return p.ExtendKeys(ctx, x, begin(db), o.Ahead) })
	if err != nil {
		return res, errs.Errorf("partitions: roll keys: make ahead: %w", err)
	}
	l, err := p.KeyPartitions(ctx, x)
	if err != nil {
		return res, errs.Errorf("partitions: roll keys: %w", err)
	}
	for _, part := range l.Parts {
		if !l.Droppable(part) {
			continue
		}
		if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, p.DropKeys(ctx, x, begin(db), part) }); err != nil {
			return res, errs.Errorf("partitions: roll keys: drop %s: %w", part.Name, err)
		}
		res.Dropped = append(res.Dropped, part.Name)
	}
	if _, err := p.PurgeKeys(ctx, x); err != nil {
		return res, errs.Errorf("partitions: roll keys: purge the catch-all: %w", err)
	}
	return res, nil
}
