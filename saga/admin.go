package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Info is a global transaction as operators see it.
type Info struct {
	GID     string    `json:"gid"`
	Mode    Mode      `json:"mode"`
	Status  Status    `json:"status"`
	Stuck   bool      `json:"stuck"` // a person must Retry or Resolve it
	Step    int       `json:"step"`  // the branch being run (counting down while compensating)
	Attempt int64     `json:"attempt"`
	Owner   string    `json:"owner,omitempty"` // the driver that claimed it last
	Tries   int       `json:"tries"`           // failed calls of the current step in a row
	Reason  string    `json:"reason,omitempty"`
	LastErr string    `json:"last_error,omitempty"`
	Created time.Time `json:"created_at"`
	Updated time.Time `json:"updated_at"`
	// DueIn is when a driver takes it next (negative: overdue; while
	// claimed, the end of the claim's lease); DeadlineIn the time left for
	// the forward phase. Both by the database clock.
	DueIn      time.Duration `json:"due_in_ns"`
	DeadlineIn time.Duration `json:"deadline_in_ns"`
	Branches   []BranchInfo  `json:"branches,omitempty"`
}

// BranchInfo is a branch's state: pending, done (action or try
// succeeded), failed (business failure), confirmed, undone (compensated or
// cancelled).
type BranchInfo struct {
	Name    string `json:"name"`
	Target  string `json:"target"` // a URL without query string
	Status  string `json:"status"`
	Tries   int    `json:"tries"`
	LastErr string `json:"last_error,omitempty"`
}

// Filter selects transactions for List.
type Filter string

const (
	All   Filter = "all"
	Live  Filter = "live"  // running, confirming or compensating
	Stuck Filter = "stuck" // waiting for a person
	Ended Filter = "ended" // succeeded, aborted or resolved
)

// Get returns a transaction with its branches; ErrNotFound when no
// transaction has that gid.
func (c *Coordinator[TTx]) Get(ctx context.Context, gid string) (Info, error) {
	return Get(ctx, c.db, gid)
}

// Get is Coordinator.Get for any driver (the CLI and the console).
func Get(ctx context.Context, db sqlcoord.Base, gid string) (Info, error) {
	if err := valid.Text("gid", gid, 128); err != nil {
		return Info{}, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	d := db.Dialect()
	x := db.Executor()
	in, err := scanInfo(x.QueryRow(ctx, d.Q().Saga.Get, gid))
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, errs.Errorf("%w: %s", ErrNotFound, valid.Quote(gid))
	}
	if err != nil {
		return Info{}, errs.Errorf("saga: get %s: %w", valid.Quote(gid), d.Classify(err))
	}
	rows, err := x.Query(ctx, d.Q().Saga.Branches, gid)
	if err != nil {
		return Info{}, errs.Errorf("saga: get %s: %w", valid.Quote(gid), d.Classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var b branchRow
		if err := rows.Scan(&b.idx, &b.name, &b.target, &b.payload, &b.status, &b.tries, &b.lastErr); err != nil {
			return Info{}, errs.Errorf("saga: get %s: %w", valid.Quote(gid), d.Classify(err))
		}
		in.Branches = append(in.Branches, BranchInfo{Name: b.name, Target: safeTarget(b.target), Status: b.status, Tries: b.tries, LastErr: b.lastErr})
	}
	if err := rows.Err(); err != nil {
		return Info{}, errs.Errorf("saga: get %s: %w", valid.Quote(gid), d.Classify(err))
	}
	return in, nil
}

// List returns up to limit transactions matching f, newest first.
func List(ctx context.Context, db sqlcoord.Base, f Filter, limit int) ([]Info, error) {
	d := db.Dialect()
	q := d.Q().Saga
	where := map[Filter]string{All: q.ListAll, Live: q.ListLive, Stuck: q.ListStuck, Ended: q.ListEnded, "": q.ListAll}[f]
	if where == "" {
		return nil, errs.Errorf("%w: filter %s (want all, live, stuck or ended)", ErrInvalid, valid.Quote(string(f)))
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.Executor().Query(ctx, fmt.Sprintf(q.List, where), limit)
	if err != nil {
		return nil, errs.Errorf("saga: list: %w", d.Classify(err))
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		in, err := scanInfo(rows)
		if err != nil {
			return nil, errs.Errorf("saga: list: %w", d.Classify(err))
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Errorf("saga: list: %w", d.Classify(err))
	}
	return out, nil
}

func scanInfo(r interface{ Scan(...any) error }) (Info, error) {
	var in Info
	var mode, status string
	var due, deadline float64
	err := r.Scan(&in.GID, &mode, &status, &in.Stuck, &in.Step, new(int), &in.Attempt, &in.Owner, &in.Tries,
		&in.Reason, &in.LastErr, &in.Created, &in.Updated, &due, &deadline)
	in.Mode, in.Status = Mode(mode), Status(status)
	in.DueIn = time.Duration(due * float64(time.Second))
	in.DeadlineIn = time.Duration(deadline * float64(time.Second))
	return in, err
}

// Retry makes a stuck transaction due again: the driver that claims it
// next calls its current step again, with a fresh count of tries.
func Retry(ctx context.Context, db sqlcoord.Base, gid string) error {
	return operate(ctx, db, gid, "retry", db.Dialect().Q().Saga.Retry, gid)
}

// Resolve ends a stuck transaction as Resolved, recording why (a person
// fixed what its branches could not): no driver touches it again.
func Resolve(ctx context.Context, db sqlcoord.Base, gid, reason string) error {
	if err := valid.Text("reason", reason, 2000); err != nil {
		return errs.Errorf("%w: %w", ErrInvalid, err)
	}
	return operate(ctx, db, gid, "resolve", db.Dialect().Q().Saga.Resolve, "resolved: "+reason, gid)
}

func operate(ctx context.Context, db sqlcoord.Base, gid, what, q string, args ...any) error {
	if err := valid.Text("gid", gid, 128); err != nil {
		return errs.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := db.Executor().Exec(ctx, q, args...)
	if err != nil {
		return errs.Errorf("saga: %s %s: %w", what, valid.Quote(gid), db.Dialect().Classify(err))
	}
	if n == 1 {
		return nil
	}
	if _, err := Get(ctx, db, gid); err != nil {
		return errs.Errorf("saga: %s: %w", what, err)
	}
	return errs.Errorf("saga: %s: %w: %s", what, ErrNotStuck, valid.Quote(gid))
}

// Cleanup deletes ended transactions (and their branches) last changed
// more than age ago, batch rows per transaction. Clean the participants'
// barriers (txn.Barrier.Cleanup) with a longer age than no driver call can
// outlive.
func Cleanup(ctx context.Context, db sqlcoord.Base, age time.Duration, batch int) (int64, error) {
	if age < 0 {
		return 0, errs.Errorf("saga: %w", sqlutil.ErrNegativeAge)
	}
	if batch <= 0 {
		batch = 1000
	}
	n, err := sqlutil.InBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), batch, func(ctx context.Context, x dialects.Executor) (int64, error) {
		return db.Dialect().SagaCleanup(ctx, x, age, batch)
	})
	if err != nil {
		return n, errs.Errorf("saga: cleanup: %w", err)
	}
	return n, nil
}

// Counts returns the number of transactions per status, stuck ones under
// "stuck" (for metrics and the console).
func Counts(ctx context.Context, db sqlcoord.Base) (map[string]int64, error) {
	d := db.Dialect()
	rows, err := db.Executor().Query(ctx, d.Q().Saga.Counts)
	if err != nil {
		return nil, errs.Errorf("saga: counts: %w", d.Classify(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var status string
		var stuck bool
		var n int64
		if err := rows.Scan(&status, &stuck, &n); err != nil {
			return nil, errs.Errorf("saga: counts: %w", d.Classify(err))
		}
		if stuck {
			status = "stuck"
		}
		out[status] += n
	}
	return out, rows.Err()
}
