package sqlcoord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Epochs is a client's memory of the newest failover epoch it has seen: a
// high-water mark that only goes up. Every statement that issues or
// checks a counter that must never go back (a lease's fencing token, a
// fenced write, a segment range, a job attempt, a worker grant) carries it
// to the server, which refuses with dialects.ErrStalePrimary when it
// writes in an older epoch — an old primary still running after a
// promotion (split brain), or a restored database — and returns the epoch
// it wrote in, which raises the mark. Each driver (DB, SQLX, Pgx) has one;
// with Options.EpochFile (WrapOptions.EpochFile) it is kept in a file, so
// a restarted client remembers it too.
//
// The mark protects clients that have seen the newer server; a client
// that has only ever talked to the old primary cannot know it is old. See
// docs/failover.md.
type Epochs struct {
	seen atomic.Int64
	file string
	mu   sync.Mutex // serialises writes of file
}

// newEpochs returns a mark read from file ("": in memory only). A file
// that does not exist yet starts at 0; one that cannot be read is an
// error (a client that forgot its mark would accept a stale primary).
func newEpochs(file string) (*Epochs, error) {
	e := &Epochs{file: file}
	if file == "" {
		return e, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return nil, fmt.Errorf("sqlcoord: epoch file %s: not an epoch: %q", file, strings.TrimSpace(string(b)))
	}
	e.seen.Store(v)
	return e, nil
}

// Seen is the newest epoch seen (0: none since the first fork).
func (e *Epochs) Seen() int64 {
	if e == nil {
		return 0
	}
	return e.seen.Load()
}

// Observe raises the mark to epoch (never lowers it) and, with a file,
// writes it there before returning (write to a temporary file, fsync,
// rename).
func (e *Epochs) Observe(epoch int64) error {
	if e == nil {
		return nil
	}
	for {
		cur := e.seen.Load()
		if epoch <= cur {
			return nil
		}
		if e.seen.CompareAndSwap(cur, epoch) {
			break
		}
	}
	if e.file == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.seen.Load() // the highest by now
	tmp, err := os.CreateTemp(filepath.Dir(e.file), ".sqlcoord-epoch-*")
	if err != nil {
		return fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := fmt.Fprintf(tmp, "%d\n", v); err != nil {
		tmp.Close()
		return fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	if err := os.Rename(tmp.Name(), e.file); err != nil {
		return fmt.Errorf("sqlcoord: epoch file: %w", err)
	}
	return nil
}

// CurrentEpoch returns the failover epoch the server db reaches writes in
// (starting a new one if its history is not recorded: a promoted or
// restored server), checked against db's mark (ErrStalePrimary), and
// raises the mark. 0 on the MySQL family until it has epochs, and on a
// database that never forked.
func CurrentEpoch(ctx context.Context, db Base) (int64, error) {
	g, err := db.Dialect().WorkerEpochReady(ctx, db.Executor(), 0, db.Epochs().Seen())
	if err != nil {
		return 0, fmt.Errorf("sqlcoord: epoch: %w", db.Dialect().Classify(err))
	}
	return g.Epoch, db.Epochs().Observe(g.Epoch)
}

// AdvanceEpoch starts a new failover epoch on the server db reaches (its
// base above every recorded one and the clock's; see docs/failover.md) and
// returns its base — for a failover tool's hook after a promotion or a
// restore that sqlcoord cannot detect by itself (a MariaDB restore keeps
// @@server_id), or after a suspected split brain. Counters issued from
// then on are above every value issued before on any history this
// database knows.
func AdvanceEpoch(ctx context.Context, db Base) (int64, error) {
	if db.Dialect().Q.EpochList == "" {
		return 0, fmt.Errorf("sqlcoord: epoch advance: %s has no failover epoch (Galera certifies every commit cluster-wide)", db.Dialect().Name())
	}
	b, err := db.Dialect().EpochAdvance(ctx, db.Executor())
	if err != nil {
		return 0, fmt.Errorf("sqlcoord: epoch advance: %w", db.Dialect().Classify(err))
	}
	return b, db.Epochs().Observe(b)
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
	q := db.Dialect().Q.EpochList
	if q == "" {
		return []Fork{}, nil
	}
	rows, err := db.Executor().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlcoord: forks: %w", db.Dialect().Classify(err))
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
