package sqlcoord

import (
	"context"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// Epochs is a client's memory of the newest failover epoch it has seen (a
// high-water mark that only goes up): see docs/failover.md. Seen reads it;
// only sqlcoord raises it, from what its statements report (and writes
// Options.EpochFile then).
type Epochs = core.Epochs

// CurrentEpoch returns the failover epoch the server db reaches writes in
// (starting a new one if its history is not recorded: a promoted or
// restored server), checked against db's mark (ErrStalePrimary), and
// raises the mark. 0 on the MySQL family until it has epochs, and on a
// database that never forked.
func CurrentEpoch(ctx context.Context, db Base) (int64, error) {
	g, err := db.Dialect().WorkerEpochReady(ctx, db.Executor(), 0, db.Epochs().Seen())
	if err != nil {
		return 0, errs.Errorf("sqlcoord: epoch: %w", db.Dialect().Classify(err))
	}
	return g.Epoch, core.ObserveEpoch(db.Epochs(), g.Epoch)
}

// AdvanceEpoch starts a new failover epoch on the server db reaches (its
// base above every recorded one and the clock's; see docs/failover.md) and
// returns its base — for a failover tool's hook after a promotion or a
// restore that sqlcoord cannot detect by itself (a MariaDB restore keeps
// @@server_id), or after a suspected split brain. Counters issued from
// then on are above every value issued before on any history this
// database knows.
func AdvanceEpoch(ctx context.Context, db Base) (int64, error) {
	if db.Dialect().Q().EpochList == "" {
		return 0, fmt.Errorf("sqlcoord: epoch advance: %s has no failover epoch (Galera certifies every commit cluster-wide)", db.Dialect().Name())
	}
	b, err := db.Dialect().EpochAdvance(ctx, db.Executor())
	if err != nil {
		return 0, errs.Errorf("sqlcoord: epoch advance: %w", db.Dialect().Classify(err))
	}
	return b, core.ObserveEpoch(db.Epochs(), b)
}

// Fork is one history of the database recorded in coord_forks: a server
// writing as the primary — PostgreSQL (system identifier/timeline),
// MySQL/MariaDB @@server_id — and the epoch base of what it issues.
type Fork struct {
	History   string    `json:"history"`
	Base      int64     `json:"base"`
	FirstSeen time.Time `json:"first_seen"`
	Reason    string    `json:"reason"`
	// Current: the server db reaches writes on this history and it is the
	// newest recorded. No current fork: a history not recorded yet (a
	// promoted or restored server; its first counter records it), or a
	// standby.
	Current bool `json:"current"`
}

// Forks lists the histories the database recorded, oldest first.
func Forks(ctx context.Context, db Base) ([]Fork, error) {
	q := db.Dialect().Q().EpochList
	if q == "" {
		return []Fork{}, nil
	}
	rows, err := db.Executor().Query(ctx, q)
	if err != nil {
		return nil, errs.Errorf("sqlcoord: forks: %w", db.Dialect().Classify(err))
	}
	defer rows.Close()
	out := []Fork{}
	for rows.Next() {
		var f Fork
		if err := rows.Scan(&f.History, &f.Base, &f.FirstSeen, &f.Reason, &f.Current); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
