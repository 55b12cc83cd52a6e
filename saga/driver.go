package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/txn"
)

// maxStoredError bounds last_error.
const maxStoredError = 2000

// claimed is a global transaction this driver holds.
type claimed struct {
	gid      string
	mode     Mode
	status   Status
	step     int
	branches []branchRow
	attempt  int64
	tries    int
	token    string
	deadline time.Time // of the forward phase, on this process's monotonic clock
}

type branchRow struct {
	idx          int
	name, target string
	payload      []byte
	status       string
	tries        int
	lastErr      string
}

// Run drives global transactions until ctx ends (then it returns nil
// after releasing what it held, so another driver goes on at once) or
// the database refuses for good (no schema, read-only, access denied, a
// stale primary: the error is returned). Run any number of drivers, in
// any processes.
func (c *Coordinator[TTx]) Run(ctx context.Context) error {
	sem := make(chan struct{}, c.opts.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	failures := 0
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		// One claim for every free worker: fewer claims (and, on the MySQL
		// family, fewer flushed commits) when a backlog is waiting.
		free := 1
		for free < c.opts.Workers {
			select {
			case sem <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		gs, err := c.claim(ctx, "", free)
		for range free - len(gs) {
			<-sem
		}
		if err != nil || len(gs) == 0 {
			if ctx.Err() != nil {
				return nil
			}
			wait := c.opts.Poll
			if err != nil {
				if sqlcoord.Fatal(err) {
					c.opts.Logger.Error("saga: driver stopping", "err", err)
					return err
				}
				c.opts.Logger.Warn("saga: claim failed", "err", err)
				wait = c.retry().Delay(failures)
				failures++
			} else {
				failures = 0
			}
			if backoff.Sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		failures = 0
		for _, g := range gs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c.drive(ctx, g)
			}()
		}
	}
}

// Drive claims the transaction gid, if it is due, and drives it in this
// goroutine until it ends, must wait for a retry, becomes stuck or ctx
// ends; it returns the transaction's status then (Get tells more). Call
// it right after the business transaction that began gid committed, for
// the lowest latency (no polling); Run's drivers take over whatever Drive
// leaves — a retry, a crash of this process. A transaction that another
// driver holds, or that waits for a retry, is left alone: its status is
// returned as it is. ErrNotFound when there is no such transaction (the
// business transaction rolled back).
func (c *Coordinator[TTx]) Drive(ctx context.Context, gid string) (Status, error) {
	if err := valid.Text("gid", gid, 128); err != nil {
		return "", errs.Errorf("%w: %w", ErrInvalid, err)
	}
	gs, err := c.claim(ctx, gid, 1)
	if err != nil {
		return "", err
	}
	if len(gs) == 0 {
		in, err := c.Get(ctx, gid)
		return in.Status, err
	}
	c.drive(ctx, gs[0])
	return gs[0].status, nil
}

// RunDue drives every transaction that is due now, one after the other,
// and returns how many it claimed: for tests, tools and cron-style
// drivers. A transaction that must wait for a retry is left for later.
func (c *Coordinator[TTx]) RunDue(ctx context.Context) (int, error) {
	n := 0
	for {
		gs, err := c.claim(ctx, "", 1)
		if err != nil {
			return n, err
		}
		if len(gs) == 0 {
			return n, nil
		}
		n++
		c.drive(ctx, gs[0])
		if err := ctx.Err(); err != nil {
			return n, err
		}
	}
}

func (c *Coordinator[TTx]) retry() backoff.Policy {
	return backoff.Policy{Base: c.opts.RetryBase, Max: c.opts.RetryMax, Jitter: backoff.Equal}
}

// claim takes up to max due transactions, oldest due first (gid: that
// one, if due); none when nothing is due.
//
// A claim is a relaxed commit where the dialect allows it: a claim that
// a crash of the database loses leaves the rows as they were, and the
// driver that made it finds out at its next fenced record (a record that
// is flushed flushes the claim before it). One token serves the batch:
// the fence is per row.
func (c *Coordinator[TTx]) claim(ctx context.Context, gid string, max int) ([]*claimed, error) {
	d := c.db.Dialect()
	cl := dialects.SagaClaim{GID: gid, Token: claimToken(), Owner: c.opts.Owner, LeaseMicros: c.opts.Lease.Microseconds(), Max: max}
	rows, err := c.claimRows(ctx, cl)
	if err != nil {
		return nil, errs.Errorf("saga: claim: %w", d.Classify(err))
	}
	gs := make([]*claimed, 0, len(rows))
	for _, r := range rows {
		g := &claimed{gid: r.GID, mode: Mode(r.Mode), status: Status(r.Status), step: r.Step, attempt: r.Attempt, tries: r.Tries,
			token: cl.Token, deadline: time.Now().Add(time.Duration(r.LeftMicros) * time.Microsecond)}
		bs, err := c.db.Executor().Query(ctx, d.Q().Saga.Branches, g.gid)
		if err != nil {
			return nil, errs.Errorf("saga: %s: branches: %w", valid.Quote(g.gid), d.Classify(err))
		}
		for bs.Next() {
			var b branchRow
			if err := bs.Scan(&b.idx, &b.name, &b.target, &b.payload, &b.status, &b.tries, &b.lastErr); err != nil {
				bs.Close()
				return nil, errs.Errorf("saga: %s: branches: %w", valid.Quote(g.gid), d.Classify(err))
			}
			g.branches = append(g.branches, b)
		}
		bs.Close()
		if err := bs.Err(); err != nil {
			return nil, errs.Errorf("saga: %s: branches: %w", valid.Quote(g.gid), d.Classify(err))
		}
		if len(g.branches) != r.Branches {
			return nil, errs.Errorf("saga: %s: %d branch rows for %d branches", valid.Quote(g.gid), len(g.branches), r.Branches)
		}
		if g.attempt > 1 {
			c.opts.Logger.Info("saga: taken over", "gid", g.gid, "attempt", g.attempt, "status", g.status, "step", g.step)
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// claimRows runs the dialect's claim: on the pool, or — the oldest due
// ones on the MySQL family — in a READ COMMITTED transaction of its own.
func (c *Coordinator[TTx]) claimRows(ctx context.Context, cl dialects.SagaClaim) ([]dialects.SagaClaimed, error) {
	d := c.db.Dialect()
	if cl.GID != "" || !d.SagaClaimInTx() {
		return d.SagaClaim(ctx, c.db.Executor(), cl)
	}
	tx, err := core.Owned(ctx, c.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := d.SagaClaim(ctx, tx, cl)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows, d.ClassifyCommit(tx.Commit(ctx))
}

// change is one recorded step of a driver.
type change struct {
	status Status
	step   int
	tries  int
	reason string
	err    string
	stuck  bool
	due    time.Duration // from now; with keep, the renewed lease
	keep   bool          // keep the claim (else release it)
	branch *branchRow    // its row to update too
	// durable: the record must survive a crash of the database before
	// the driver goes on. Forward progress is (it is the high-water mark
	// of the branches that may have been called: a driver taking over
	// compensates from there), and so is every change of phase (to
	// confirming, to compensating: calling a Confirm or a Compensate
	// commits the transaction to that direction), and stuck. The other
	// records — claims, retries, confirm and compensate progress, a TCC's
	// or a compensation's end — may be lost: the transaction is then
	// driven again from the last durable record in the same direction,
	// and the barrier skips what was done. (A saga's success is durable.)
	durable bool
}

// record writes ch fenced by the claim, in one statement; errLost when
// it was taken over.
func (c *Coordinator[TTx]) record(ctx context.Context, g *claimed, ch change) error {
	d := c.db.Dialect()
	ctx = context.WithoutCancel(ctx) // a step that happened is recorded even while stopping
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	r := dialects.SagaRecord{GID: g.gid, Claim: g.token, Status: string(ch.status), Step: ch.step, Tries: ch.tries,
		Reason: ch.reason, Err: ch.err, Stuck: ch.stuck, Keep: ch.keep, Durable: ch.durable, DueMicros: ch.due.Microseconds(), Idx: -1}
	if b := ch.branch; b != nil {
		r.Idx, r.BranchStatus, r.BranchTries, r.BranchErr = b.idx, b.status, b.tries, b.lastErr
	}
	ok, err := d.SagaRecord(ctx, c.db.Executor(), r)
	for attempt := 1; err != nil && errors.Is(d.ClassifyCommit(err), sqlcoord.ErrUnreachable); attempt++ {
		// No connection could be opened, so nothing was sent and the
		// claim is still ours: try again at once, then backing off,
		// within the call's timeout.
		if backoff.Sleep(ctx, backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.Full}.Delay(attempt)) != nil {
			break
		}
		ok, err = d.SagaRecord(ctx, c.db.Executor(), r)
	}
	if err != nil {
		return d.ClassifyCommit(err)
	}
	if !ok {
		return errLost
	}
	g.status, g.step, g.tries = ch.status, ch.step, ch.tries
	return nil
}

// ops names the operations of a mode: forward, confirm ("" for a saga),
// undo.
func ops(m Mode) (fwd, confirm, undo txn.Op) {
	if m == ModeTCC {
		return txn.OpTry, txn.OpConfirm, txn.OpCancel
	}
	return txn.OpAction, "", txn.OpCompensate
}

// drive runs g's branches until it ends, must wait for a retry, becomes
// stuck, is taken over, or ctx ends.
func (c *Coordinator[TTx]) drive(ctx context.Context, g *claimed) {
	log := c.opts.Logger.With("gid", g.gid)
	fwd, confirm, undo := ops(g.mode)
	for {
		if ctx.Err() != nil {
			// Stopping: release at once so another driver goes on.
			err := c.record(ctx, g, change{status: g.status, step: g.step, tries: g.tries})
			if err != nil && !errors.Is(err, errLost) {
				log.Warn("saga: release on stop failed (taken over after the lease)", "err", err)
			}
			return
		}
		var err error
		switch g.status {
		case Running:
			if time.Now().After(g.deadline) {
				err = c.record(ctx, g, change{status: Compensating, step: g.step, reason: "timeout: the forward phase passed its deadline",
					due: c.opts.Lease, keep: true, durable: true})
				break
			}
			err = c.step(ctx, g, fwd)
		case Confirming:
			err = c.step(ctx, g, confirm)
		case Compensating:
			err = c.step(ctx, g, undo)
		default:
			return
		}
		switch {
		case err == nil:
		case errors.Is(err, errWait):
			return
		case errors.Is(err, errLost):
			log.Info("saga: claim lost; another driver has the transaction")
			return
		default:
			log.Warn("saga: recording a step failed; the transaction is retried after the lease", "err", err)
			return
		}
		if g.status.Ended() {
			log.Info("saga: ended", "status", g.status)
			return
		}
	}
}

// errWait: the transaction was released to wait (retry backoff, stuck).
var errWait = errors.New("saga: waiting")

// step calls op on the current branch and records the outcome.
func (c *Coordinator[TTx]) step(ctx context.Context, g *claimed, op txn.Op) error {
	if g.step < 0 || g.step >= len(g.branches) {
		// Nothing left in this direction (a compensation past the first
		// branch is caught below; this is a corrupt row).
		return c.record(ctx, g, change{status: g.status, step: g.step, tries: g.tries, stuck: true, durable: true,
			err: fmt.Sprintf("step %d out of range (%d branches)", g.step, len(g.branches))})
	}
	b := &g.branches[g.step]
	callErr := c.call(ctx, g, b, op)
	if ctx.Err() != nil && callErr != nil {
		return nil // stopping: the loop releases the claim
	}
	b.tries++
	if callErr == nil {
		b.lastErr = ""
		next := change{status: g.status, tries: 0, due: c.opts.Lease, keep: true, branch: b}
		switch op {
		case txn.OpAction, txn.OpTry:
			b.status = "done"
			next.step = g.step + 1
			next.durable = true // the next branch may be called
			if next.step == len(g.branches) {
				if g.mode == ModeTCC {
					next.status, next.step = Confirming, 0
				} else {
					// Durable too: lost, a driver would call the last action again
					// and, past the deadline, compensate a saga that had been
					// reported succeeded.
					next.status, next.keep = Succeeded, false
				}
			}
		case txn.OpConfirm:
			b.status = "confirmed"
			next.step = g.step + 1
			if next.step == len(g.branches) {
				next.status, next.keep = Succeeded, false
			}
		default: // compensate, cancel
			b.status = "undone"
			next.step = g.step - 1
			if next.step < 0 {
				next.status, next.step, next.keep = Aborted, 0, false
			}
		}
		return c.record(ctx, g, next)
	}
	shown := callErr
	var be *businessError
	if errors.As(callErr, &be) {
		shown = be.err // the participant's reason, without "business failure: "
	}
	msg := redact.Stored(shown, maxStoredError)
	b.lastErr = msg
	business := errors.Is(callErr, ErrBusiness)
	tries := g.tries + 1
	switch {
	case business && (op == txn.OpAction || op == txn.OpTry):
		b.status = "failed"
		reason := fmt.Sprintf("branch %s: %s failed: %s", b.name, op, msg)
		c.opts.Logger.Info("saga: compensating", "gid", g.gid, "reason", reason)
		return c.record(ctx, g, change{status: Compensating, step: g.step, reason: trim(reason), err: msg,
			due: c.opts.Lease, keep: true, branch: b, durable: true})
	case business || (op != txn.OpAction && op != txn.OpTry && tries >= c.opts.StuckAfter):
		reason := fmt.Sprintf("branch %s: %s failed %s: %s", b.name, op, times(tries), msg)
		if business {
			reason = fmt.Sprintf("branch %s: %s refused: %s", b.name, op, msg)
		}
		c.opts.Logger.Error("saga: stuck; a person must retry or resolve it", "gid", g.gid, "reason", reason)
		if err := c.record(ctx, g, change{status: g.status, step: g.step, tries: tries, reason: trim(reason), err: msg,
			stuck: true, branch: b, durable: true}); err != nil {
			return err
		}
		return errWait
	}
	wait := c.retry().Delay(tries - 1)
	if g.status == Running {
		wait = min(wait, max(time.Until(g.deadline), 0))
	}
	if err := c.record(ctx, g, change{status: g.status, step: g.step, tries: tries, err: msg, due: wait, branch: b}); err != nil {
		return err
	}
	return errWait
}

// times is "once" or "n times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// trim bounds a reason like last_error.
func trim(s string) string { return redact.Stored(errors.New(s), maxStoredError) }

// call runs op on branch b within CallTimeout, as a span and a metric
// ("saga.action", "saga.try", …).
func (c *Coordinator[TTx]) call(ctx context.Context, g *claimed, b *branchRow, op txn.Op) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	ctx, end := tracing.Start(ctx, c.db, "saga."+string(op), c.db.Dialect(),
		attribute.String("sqlcoord.gid", g.gid), attribute.String("sqlcoord.branch", b.name),
		attribute.Int64("sqlcoord.attempt", g.attempt))
	defer func() { end(err) }()
	call := Call{GID: g.gid, Branch: b.name, Op: op, Payload: b.payload, Attempt: g.attempt}
	if isURL(b.target) {
		return c.callHTTP(ctx, b.target, call)
	}
	fn, err := c.funcs.get(b.target)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("saga: branch function %s panicked: %v", valid.Quote(b.target), p)
		}
	}()
	return fn(ctx, call)
}
