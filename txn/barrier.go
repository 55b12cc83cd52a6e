package txn

import (
	"context"
	"errors"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Op is a branch operation of a distributed transaction.
type Op string

const (
	OpTry        Op = "try"
	OpConfirm    Op = "confirm"
	OpCancel     Op = "cancel"
	OpAction     Op = "action"     // saga forward step
	OpCompensate Op = "compensate" // saga compensation
)

// origin is the operation a compensation undoes.
var origin = map[Op]Op{OpCancel: OpTry, OpCompensate: OpAction}

// Barrier is a sub-transaction barrier over coord_txn_barrier, unique on
// (gid, branch, op). Each call inserts its barrier row in the same local
// transaction as the branch's business function, so:
//
//   - a duplicate Try/Confirm/Cancel/Action/Compensate finds its row and is
//     skipped (idempotence);
//   - a Cancel (Compensate) with no prior Try (Action) first inserts the
//     Try's row with reason "cancel", succeeds and does nothing (empty
//     rollback);
//   - a Try that arrives after that Cancel finds its row taken and is
//     skipped (anti-suspension).
//
// Inserts are INSERT … ON CONFLICT DO NOTHING / INSERT IGNORE with rows
// affected, never SELECT … FOR UPDATE then INSERT, which deadlocks on MySQL
// gap locks.
type Barrier[TTx any] struct{ db sqlcoord.Driver[TTx] }

// NewBarrier returns a Barrier for the driver (e.g. a *sqlcoord.DB); the
// branch functions receive the driver's transaction type.
func NewBarrier[TTx any](db sqlcoord.Driver[TTx]) *Barrier[TTx] { return &Barrier[TTx]{db: db} }

// ErrInvalidBranch: empty or over-long gid/branch, or an unknown op.
var ErrInvalidBranch = errors.New("txn: invalid barrier gid, branch or op")

// Call runs fn for (gid, branch, op) in its own transaction (retried by
// Do on deadlocks) unless the barrier says to skip it. ran reports
// whether fn ran and committed.
func (b *Barrier[TTx]) Call(ctx context.Context, gid, branch string, op Op, fn func(ctx context.Context, tx TTx) error) (ran bool, err error) {
	err = Do(ctx, b.db, Options{}, func(ctx context.Context, tx TTx) error {
		var err error
		ran, err = b.CallTx(ctx, tx, gid, branch, op, fn)
		return err
	})
	if err != nil {
		ran = false
	}
	return ran, err
}

// CallTx is Call inside the caller's transaction tx.
func (b *Barrier[TTx]) CallTx(ctx context.Context, tx TTx, gid, branch string, op Op, fn func(ctx context.Context, tx TTx) error) (_ bool, retErr error) {
	ctx, end := tracing.Start(ctx, b.db, "barrier", b.db.Dialect(), attribute.String("sqlcoord.op", string(op)))
	defer func() { end(retErr) }()
	if err := valid.Text("barrier gid", gid, 128); err != nil {
		return false, errs.Errorf("%w: %w", ErrInvalidBranch, err)
	}
	if err := valid.Text("barrier branch", branch, 128); err != nil {
		return false, errs.Errorf("%w: %w", ErrInvalidBranch, err)
	}
	switch op {
	case OpTry, OpConfirm, OpCancel, OpAction, OpCompensate:
	default:
		return false, errs.Errorf("%w: op %q", ErrInvalidBranch, op)
	}
	q := b.db.Dialect().Q().BarrierInsert
	insert := func(o Op) (int64, error) {
		n, err := b.db.TxExecutor(tx).Exec(ctx, q, gid, branch, string(o), string(op))
		return n, b.db.Dialect().Classify(err)
	}
	var originInserted int64
	if o, ok := origin[op]; ok {
		var err error
		if originInserted, err = insert(o); err != nil {
			return false, errs.Errorf("txn: barrier %s/%s/%s: %w", gid, branch, op, err)
		}
	}
	current, err := insert(op)
	if err != nil {
		return false, errs.Errorf("txn: barrier %s/%s/%s: %w", gid, branch, op, err)
	}
	if originInserted > 0 || current == 0 {
		// empty compensation, duplicate, or a Try after its Cancel
		return false, nil
	}
	if err := fn(ctx, tx); err != nil {
		return false, err
	}
	return true, nil
}

// Try, Confirm and Cancel are Call with the TCC operations.
func (b *Barrier[TTx]) Try(ctx context.Context, gid, branch string, fn func(context.Context, TTx) error) (bool, error) {
	return b.Call(ctx, gid, branch, OpTry, fn)
}

// Confirm is Call with OpConfirm.
func (b *Barrier[TTx]) Confirm(ctx context.Context, gid, branch string, fn func(context.Context, TTx) error) (bool, error) {
	return b.Call(ctx, gid, branch, OpConfirm, fn)
}

// Cancel is Call with OpCancel.
func (b *Barrier[TTx]) Cancel(ctx context.Context, gid, branch string, fn func(context.Context, TTx) error) (bool, error) {
	return b.Call(ctx, gid, branch, OpCancel, fn)
}

// Action is Call with the saga forward operation.
func (b *Barrier[TTx]) Action(ctx context.Context, gid, branch string, fn func(context.Context, TTx) error) (bool, error) {
	return b.Call(ctx, gid, branch, OpAction, fn)
}

// Compensate is Call with the saga compensation.
func (b *Barrier[TTx]) Compensate(ctx context.Context, gid, branch string, fn func(context.Context, TTx) error) (bool, error) {
	return b.Call(ctx, gid, branch, OpCompensate, fn)
}

// Cleanup deletes barrier rows older than age in batches. Only delete rows
// of global transactions that can no longer receive messages: a Try that
// arrives after its Cancel's rows are gone would run.
func (b *Barrier[TTx]) Cleanup(ctx context.Context, age time.Duration, batch int) (int64, error) {
	return cleanup(ctx, b.db, b.db.Dialect().Q().BarrierCleanup, age, batch)
}
