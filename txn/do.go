// Package txn runs transactions safely and makes repeated requests harmless:
//
//   - Do runs a function in a transaction and retries it on deadlock,
//     serialization failure, lock timeout and lost connections before
//     COMMIT, but never blindly after a COMMIT whose outcome is unknown;
//   - Keys gives idempotency keys written in the caller's transaction, so
//     the key and the effect commit or roll back together;
//   - Barrier is a TCC / saga sub-transaction barrier (after DTM's design)
//     that makes Confirm/Cancel idempotent, lets an empty Cancel succeed and
//     refuses a Try that arrives after its Cancel.
//
// The unique indexes of coord_idempotency and coord_txn_barrier, not Go
// code, decide which request wins.
package txn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
)

// ErrNotCommitted is returned when a COMMIT's acknowledgement was lost,
// verification showed the transaction did not commit, and no attempts were
// left to retry it.
var ErrNotCommitted = errors.New("txn: transaction did not commit")

// Options tune Do. The zero value retries up to 5 attempts.
type Options struct {
	// MaxAttempts including the first; default 5. 1 disables retries.
	MaxAttempts int
	// Backoff before retry n is a random duration in [0, min(MaxBackoff,
	// BaseBackoff·2ⁿ)] ("full jitter"); defaults 10ms and 1s.
	BaseBackoff, MaxBackoff time.Duration
	// Isolation and ReadOnly go to BeginTx.
	Isolation sql.IsolationLevel
	ReadOnly  bool
	// CommitMarker, if set, is a unique id Do inserts into
	// coord_txn_commits inside the transaction. When COMMIT's outcome is
	// unknown, Do looks for it (on a fresh connection) and so knows: found
	// → success; not found → the transaction did not commit and is
	// retried. Use a new id per logical transaction (e.g. a request id).
	CommitMarker string
	// Verify, if set, is called when COMMIT's outcome is unknown and must
	// report whether the transaction's effect is in the database.
	Verify func(ctx context.Context, db *sqlcoord.DB) (committed bool, err error)
	// OnRetry, if set, sees each error that causes a retry.
	OnRetry func(attempt int, err error)
}

// Do runs fn in a transaction on db and commits it. When fn or COMMIT fails
// with a retryable error (dialects.Retryable, or a connection lost before
// COMMIT) the whole transaction is run again, after a jittered backoff, up
// to MaxAttempts; fn must therefore have no effects outside tx. Any other
// error from fn rolls back and is returned at once, unchanged (wrapped).
// A panic in fn rolls back and re-panics.
//
// When the connection is lost during COMMIT the outcome is unknown: without
// CommitMarker or Verify, Do returns an error matching
// dialects.ErrCommitUnknown and does not retry.
func Do(ctx context.Context, db *sqlcoord.DB, opts Options, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Second
	}
	d := db.Dialect
	var last error
	for attempt := 1; attempt <= opts.MaxAttempts; attempt++ {
		if attempt > 1 {
			if opts.OnRetry != nil {
				opts.OnRetry(attempt-1, last)
			}
			if err := sleep(ctx, backoff(opts, attempt-1)); err != nil {
				return fmt.Errorf("txn: %w (last error: %v)", err, last)
			}
		}
		err := once(ctx, db, opts, fn)
		if err == nil {
			return nil
		}
		if errors.Is(err, dialects.ErrCommitUnknown) {
			if opts.CommitMarker == "" && opts.Verify == nil {
				return err
			}
			committed, verr := verify(ctx, db, opts)
			if verr != nil {
				return fmt.Errorf("%w; verification failed too: %v", err, verr)
			}
			if committed {
				return nil
			}
			last = fmt.Errorf("%w: verified not committed", ErrNotCommitted)
			continue
		}
		cerr := d.Classify(err)
		if !(dialects.Retryable(cerr) || errors.Is(cerr, dialects.ErrConnLost)) || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return fmt.Errorf("txn: gave up after %d attempts: %w", opts.MaxAttempts, last)
}

func once(ctx context.Context, db *sqlcoord.DB, opts Options, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	d := db.Dialect
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: opts.Isolation, ReadOnly: opts.ReadOnly})
	if err != nil {
		return fmt.Errorf("txn: begin: %w", d.Classify(err))
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
	}()
	if opts.CommitMarker != "" {
		if _, err := tx.ExecContext(ctx, d.Q.CommitMarkerInsert, opts.CommitMarker); err != nil {
			tx.Rollback()
			cerr := d.Classify(err)
			if errors.Is(cerr, dialects.ErrDuplicate) {
				return fmt.Errorf("txn: commit marker %q already used (it committed before): %w", opts.CommitMarker, cerr)
			}
			return fmt.Errorf("txn: commit marker: %w", cerr)
		}
	}
	if err := fn(ctx, tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("txn: %w", d.Classify(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("txn: commit: %w", d.ClassifyCommit(err))
	}
	return nil
}

func verify(ctx context.Context, db *sqlcoord.DB, opts Options) (bool, error) {
	// The pool may hand back other connections through the same broken
	// path; retry the check briefly.
	var err error
	for i := 0; i < 5; i++ {
		var ok bool
		if opts.Verify != nil {
			ok, err = opts.Verify(ctx, db)
		} else {
			var one int
			err = db.QueryRowContext(ctx, db.Dialect.Q.CommitMarkerExists, opts.CommitMarker).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			ok = err == nil
		}
		if err == nil {
			return ok, nil
		}
		if sleep(ctx, 50*time.Millisecond<<i) != nil {
			break
		}
	}
	return false, err
}

func backoff(o Options, n int) time.Duration {
	c := o.BaseBackoff << min(n, 20)
	if c > o.MaxBackoff || c <= 0 {
		c = o.MaxBackoff
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CleanupMarkers deletes commit markers older than age, batch rows per
// statement, until none are left; it never blocks concurrent inserts
// (SKIP LOCKED on PostgreSQL, small LIMITed deletes on MySQL).
func CleanupMarkers(ctx context.Context, db *sqlcoord.DB, age time.Duration, batch int) (int64, error) {
	return cleanup(ctx, db, db.Dialect.Q.CommitMarkerCleanup, age, batch)
}

func cleanup(ctx context.Context, db *sqlcoord.DB, q string, age time.Duration, batch int) (int64, error) {
	return sqlutil.DeleteInBatches(ctx, db, q, age, batch)
}
