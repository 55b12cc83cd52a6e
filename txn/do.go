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
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/metrics"
)

// ErrNotCommitted is returned when a COMMIT's acknowledgement was lost,
// verification showed the transaction did not commit, and no attempts were
// left to retry it.
var ErrNotCommitted = errors.New("txn: transaction did not commit")

// ErrInvalidOptions: a negative count or duration in Options or
// KeysOptions.
var ErrInvalidOptions = errors.New("txn: invalid options")

// ErrInvalidMarker: a CommitMarker that is over 255 bytes, not UTF-8 or
// contains NUL.
var ErrInvalidMarker = errors.New("txn: invalid commit marker")

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
	// unknown, Do first makes sure the old transaction can no longer
	// commit (see Do), then looks for the marker: found → success; not
	// found → the transaction did not commit and is retried. A marker
	// that is already present when an attempt inserts it also means the
	// logical transaction committed before: Do returns nil without calling
	// fn. Use a new id per logical transaction (e.g. a request id).
	CommitMarker string
	// Verify, if set, is called when COMMIT's outcome is unknown, after
	// the old transaction's session is proven gone, and must report
	// whether the transaction's effect is in the database.
	Verify func(ctx context.Context, db dialects.Executor) (committed bool, err error)
	// VerifyTimeout bounds how long Do tries to end the old session and
	// verify (default 30s). When it runs out, Do returns an error matching
	// sqlcoord.ErrCommitUnknown: the outcome could not be proven.
	VerifyTimeout time.Duration
	// OnRetry, if set, sees each error that causes a retry.
	OnRetry func(attempt int, err error)
}

// Do runs fn in a transaction on db and commits it. When fn or COMMIT fails
// with a retryable error (sqlcoord.Retryable, or a connection lost before
// COMMIT) the whole transaction is run again, after a jittered backoff, up
// to MaxAttempts; fn must therefore have no effects outside tx. Any other
// error from fn rolls back and is returned at once, unchanged (wrapped).
// A panic in fn rolls back and re-panics.
//
// When the connection is lost during COMMIT the outcome is unknown: without
// CommitMarker or Verify, Do returns an error matching
// sqlcoord.ErrCommitUnknown and does not retry.
//
// With either, Do proves the outcome instead of guessing it. Each attempt
// records the server session running it (PostgreSQL pg_backend_pid and
// backend_start, MySQL/MariaDB CONNECTION_ID); after a lost COMMIT reply,
// Do ends that session from a fresh connection (pg_terminate_backend /
// KILL CONNECTION) and waits until the server no longer lists it. Only
// then is the outcome final — a COMMIT still in flight has either
// committed or can never commit — and only then does Do check the marker
// or call Verify. The database user needs the right to end its own
// sessions (PostgreSQL allows it for sessions of the same role; MySQL for
// the same user, otherwise CONNECTION_ADMIN). If the session cannot be
// proven gone within VerifyTimeout, Do returns ErrCommitUnknown rather
// than risk running fn twice.
//
// TTx is the application stack's transaction type: *sql.Tx with a
// *sqlcoord.DB, *sqlx.Tx with sqlxdriver.Wrap, pgx.Tx with
// pgxv5.Wrap; fn receives that.
func Do[TTx any](ctx context.Context, db sqlcoord.Driver[TTx], opts Options, fn func(ctx context.Context, tx TTx) error) (retErr error) {
	ctx, end := tracing.Start(ctx, db, "txn.do", db.Dialect())
	defer func() { end(retErr) }()
	if opts.MaxAttempts < 0 || opts.BaseBackoff < 0 || opts.MaxBackoff < 0 || opts.VerifyTimeout < 0 {
		return errs.Errorf("%w: negative MaxAttempts %d, BaseBackoff %v, MaxBackoff %v or VerifyTimeout %v",
			ErrInvalidOptions, opts.MaxAttempts, opts.BaseBackoff, opts.MaxBackoff, opts.VerifyTimeout)
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 5
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Second
	}
	if opts.CommitMarker != "" {
		if err := valid.Text("commit marker", opts.CommitMarker, 255); err != nil {
			return errs.Errorf("%w: %w", ErrInvalidMarker, err)
		}
	}
	if opts.MaxBackoff < opts.BaseBackoff {
		opts.MaxBackoff = opts.BaseBackoff
	}
	d := db.Dialect()
	rec := metrics.Of(db)
	var last error
	for attempt := 1; attempt <= opts.MaxAttempts; attempt++ {
		if attempt > 1 {
			rec.TxnRetry(d.Name(), retryReason(d.Classify(last)))
			if opts.OnRetry != nil {
				opts.OnRetry(attempt-1, last)
			}
			if err := backoff.Sleep(ctx, backoff.Policy{Base: opts.BaseBackoff, Max: opts.MaxBackoff, Jitter: backoff.Full}.Delay(attempt-1)); err != nil {
				return errs.Errorf("txn: %w (last error: %v)", err, last)
			}
		}
		sess, err := once(ctx, db, opts, fn)
		if err == nil || errors.Is(err, errMarkerFound) {
			return nil
		}
		if errors.Is(err, sqlcoord.ErrCommitUnknown) {
			if opts.CommitMarker == "" && opts.Verify == nil {
				rec.TxnCommitUnknown(d.Name(), "unknown")
				return err
			}
			committed, verr := verify(ctx, db, opts, sess)
			if verr != nil {
				rec.TxnCommitUnknown(d.Name(), "unknown")
				return errs.Errorf("%w; verification failed too: %v", err, verr)
			}
			if committed {
				rec.TxnCommitUnknown(d.Name(), "committed")
				return nil
			}
			rec.TxnCommitUnknown(d.Name(), "not_committed")
			last = errs.Errorf("%w: verified not committed", ErrNotCommitted)
			continue
		}
		cerr := d.Classify(err)
		if !(sqlcoord.Retryable(cerr) || errors.Is(cerr, sqlcoord.ErrConnLost)) || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return errs.Errorf("txn: gave up after %d attempts: %w", opts.MaxAttempts, last)
}

// retryReason names the error that made Do retry, for metrics.
func retryReason(err error) string {
	switch {
	case errors.Is(err, sqlcoord.ErrDeadlock):
		return "deadlock"
	case errors.Is(err, dialects.ErrSerialization):
		return "serialization"
	case errors.Is(err, sqlcoord.ErrConnLost):
		return "conn_lost"
	case errors.Is(err, ErrNotCommitted):
		return "not_committed"
	}
	return "error"
}

// errMarkerFound: the commit marker was already present, so the logical
// transaction committed in an earlier attempt (or call).
var errMarkerFound = errors.New("txn: commit marker present: committed before")

// session names the server session that ran an attempt.
type session struct {
	id, start int64
	known     bool
}

func verifying(opts Options) bool { return opts.CommitMarker != "" || opts.Verify != nil }

func once[TTx any](ctx context.Context, db sqlcoord.Driver[TTx], opts Options, fn func(ctx context.Context, tx TTx) error) (sess session, err error) {
	d := db.Dialect()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: opts.Isolation, ReadOnly: opts.ReadOnly})
	if err != nil {
		return sess, errs.Errorf("txn: begin: %w", d.Classify(err))
	}
	rollback := func() { db.RollbackTx(context.WithoutCancel(ctx), tx) }
	defer func() {
		if p := recover(); p != nil {
			rollback()
			panic(p)
		}
	}()
	x := db.TxExecutor(tx)
	if verifying(opts) {
		if err := x.QueryRow(ctx, d.Q().SessionID).Scan(&sess.id, &sess.start); err != nil {
			rollback()
			return sess, errs.Errorf("txn: session id: %w", d.Classify(err))
		}
		sess.known = true
	}
	if opts.CommitMarker != "" {
		if _, err := x.Exec(ctx, d.Q().CommitMarkerInsert, opts.CommitMarker); err != nil {
			rollback()
			cerr := d.Classify(err)
			if errors.Is(cerr, sqlcoord.ErrDuplicate) {
				// The insert waited for any transaction still holding the
				// marker; it exists, so that transaction committed.
				return sess, errMarkerFound
			}
			return sess, errs.Errorf("txn: commit marker: %w", cerr)
		}
	}
	if err := fn(ctx, tx); err != nil {
		rollback()
		return sess, d.Classify(err) // the caller's own error, as it made it (classified for retries)
	}
	if err := db.CommitTx(ctx, tx); err != nil {
		return sess, errs.Errorf("txn: commit: %w", d.ClassifyCommit(err))
	}
	return sess, nil
}

// verify decides a lost COMMIT: it ends the session that sent it, waits
// until the server no longer lists that session (from then on the
// transaction has committed or never will), then checks the marker or
// calls Verify. Each step is retried on a fresh connection, since the
// path that lost the COMMIT may fail again, until VerifyTimeout.
func verify(ctx context.Context, db sqlcoord.Base, opts Options, sess session) (bool, error) {
	limit := opts.VerifyTimeout
	if limit <= 0 {
		limit = 30 * time.Second
	}
	vctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if !sess.known {
		return false, errors.New("txn: the session that sent COMMIT is unknown")
	}
	var err error
	for i := 0; ; i++ {
		if err = endSession(vctx, db, sess); err == nil {
			break
		}
		if backoff.Sleep(vctx, retryPause.Delay(i)) != nil {
			return false, errs.Errorf("txn: could not prove the old session %d ended: %w", sess.id, err)
		}
	}
	for i := 0; ; i++ {
		var ok bool
		if opts.Verify != nil {
			ok, err = opts.Verify(vctx, db.Executor())
		} else {
			var one int
			err = db.Executor().QueryRow(vctx, db.Dialect().Q().CommitMarkerExists, opts.CommitMarker).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			ok = err == nil
		}
		if err == nil {
			return ok, nil
		}
		if backoff.Sleep(vctx, retryPause.Delay(i)) != nil {
			return false, err
		}
	}
}

// endSession ends the session sess and returns nil once the server no
// longer lists it.
func endSession(ctx context.Context, db sqlcoord.Base, sess session) error {
	d, pool := db.Dialect(), db.Executor()
	if err := d.EndSession(ctx, pool, sess.id, sess.start); err != nil {
		return errs.Errorf("end session: %w", d.Classify(err))
	}
	for i := 0; ; i++ {
		var n int
		if err := pool.QueryRow(ctx, d.Q().SessionAlive, sess.id, sess.start).Scan(&n); err != nil {
			return errs.Errorf("session check: %w", d.Classify(err))
		}
		if n == 0 {
			return nil
		}
		if err := backoff.Sleep(ctx, sessionPoll.Delay(i)); err != nil {
			return err
		}
	}
}

var (
	// retryPause spaces the verification's retries after a connection
	// error; sessionPoll the checks that a killed session is gone.
	retryPause  = backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second}
	sessionPoll = backoff.Policy{Base: time.Millisecond, Max: 50 * time.Millisecond}
)

// CleanupMarkers deletes commit markers older than age, batch rows per
// statement, until none are left; it never blocks concurrent inserts
// (SKIP LOCKED on PostgreSQL, small LIMITed deletes on MySQL).
func CleanupMarkers(ctx context.Context, db sqlcoord.Base, age time.Duration, batch int) (int64, error) {
	return cleanup(ctx, db, db.Dialect().Q().CommitMarkerCleanup, age, batch)
}

func cleanup(ctx context.Context, db sqlcoord.Base, q string, age time.Duration, batch int) (int64, error) {
	return sqlutil.DeleteInBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), q, age, batch)
}
