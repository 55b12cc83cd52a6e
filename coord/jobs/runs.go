// Package jobs runs scheduled jobs exactly once per slot across any number
// of instances: each slot (job, planned fire time, shard) is claimed by an
// INSERT that the primary key of coord_job_runs lets only one instance win.
// Instances' clocks may disagree; the fire time comes from the schedule,
// and the record of a run is kept, so an instance that reaches the slot
// late cannot run it again.
//
// A run heartbeats; one whose heartbeat is older than its grace period is
// taken over by another instance with a conditional update that bumps
// attempt. attempt is the run's fencing token: the superseded runner's
// heartbeats and completion are refused and its context is cancelled.
//
// A job's effects in the same database are fenced by the database, not
// only by its context: inside the transaction that writes the effect, call
// jobs.Fence (locks the run row at this attempt; a superseded attempt gets
// ErrSuperseded) and jobs.Complete (marks the run succeeded in that same
// transaction). Effect and completion then commit together, or not at
// all: a runner frozen past its grace and taken over has its write refused
// when it resumes, and a runner killed after committing its effect is not
// taken over, because the run is already succeeded.
//
// Not covered: effects outside this database (an HTTP call, an email) of a
// superseded runner, and effects written without Fence/Complete. Make those
// idempotent per item (see the sharded example) so a retried slot does no
// double work.
package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

var (
	// ErrAlreadyClaimed: another instance won the slot. Not a failure.
	ErrAlreadyClaimed = errors.New("jobs: slot already claimed")
	// ErrSuperseded: the run was taken over; this attempt's heartbeat or
	// completion was refused.
	ErrSuperseded = errors.New("jobs: run superseded by a newer attempt")
	// ErrInvalid: invalid job definition or argument.
	ErrInvalid = errors.New("jobs: invalid")
	// ErrUnknownJob: no scheduler has registered a job of that name.
	ErrUnknownJob = errors.New("jobs: unknown job")
	// ErrNotOnSchedule: a fire time the job's schedule does not produce.
	ErrNotOnSchedule = errors.New("jobs: not a slot of the job's schedule")
)

// Status of a run.
const (
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Skipped   = "skipped" // overlap policy skipped the slot, or it was missed (see Record.Reason)
	Rerun     = "rerun"   // marked for a manual re-run
	Retrying  = "retry"   // failed under a retry policy; runs again at Record.RetryAt
	Dead      = "dead"    // failed its last attempt under a retry policy, or permanently
	Queued    = "queued"  // Overlap Queue: runs when the job's earlier runs have ended
)

// ErrPermanent marks a job error that no retry can fix (see Permanent).
var ErrPermanent = errors.New("jobs: permanent failure")

// Permanent wraps err so that a job with a retry policy is not retried:
// the run goes straight to Dead. The result matches both ErrPermanent and
// err with errors.Is.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// Retry is a job's retry policy. A run that returns an error (a timeout
// counts, a superseded run or a stopping scheduler does not) is recorded
// 'retry' with a retry time; the first instance to scan after it takes
// the run over like a dead one (attempt + 1, the fencing token), so a
// frozen or killed scheduler's attempt cannot race the retry. The count
// of failed attempts is kept in the run's row, not in memory.
type Retry struct {
	// MaxAttempts caps the attempts of one slot shard that end in an
	// error: the MaxAttempts-th failure makes the run Dead. 0 or 1: no
	// retry (a failed run is 'failed', as without a policy).
	MaxAttempts int
	// BaseBackoff, MaxBackoff: retry n (n = 1 after the first failure)
	// waits a random time in [d/2, d], d = min(MaxBackoff,
	// BaseBackoff·2ⁿ⁻¹); defaults 1s and 5m.
	BaseBackoff, MaxBackoff time.Duration
}

func (p Retry) on() bool { return p.MaxAttempts > 1 }

func (p Retry) delay(failures int) time.Duration {
	return backoff.Policy{Base: p.BaseBackoff, Max: p.MaxBackoff, Jitter: backoff.Equal}.Delay(failures - 1)
}

// Run identifies one attempt at one slot shard.
type Run struct {
	Job        string    `json:"job"`
	FireTime   time.Time `json:"fire_time"` // planned, UTC, microsecond precision
	Shard      int       `json:"shard"`
	ShardTotal int       `json:"shard_total"`
	Attempt    int       `json:"attempt"` // fencing token of this attempt
	Owner      string    `json:"owner"`
	// Failures counts the slot shard's earlier attempts that ended in an
	// error (under a retry policy; 0 for a first attempt).
	Failures int `json:"failures"`

	// sent is when the claim or takeover that started this attempt was
	// sent: the run's heartbeat validity counts from it.
	sent time.Time
}

// Record is a row of coord_job_runs.
type Record struct {
	Run
	Status                 string
	StartedAt, HeartbeatAt sql.NullTime
	FinishedAt             sql.NullTime
	Error                  string // the last error (kept while a retry runs)
	RetryAt                sql.NullTime
	// Reason says why the run is skipped, queued or dead, or that a slot
	// was missed ("" otherwise).
	Reason string
}

// Runs is the low-level API over coord_job_runs used by Scheduler.
type Runs struct{ db sqlcoord.Base }

// NewRuns returns Runs for db.
func NewRuns(db sqlcoord.Base) *Runs { return &Runs{db: db} }

// validJob refuses a job name that is empty, over 128 bytes, not UTF-8 or
// contains NUL; names are compared byte for byte.
func validJob(name string) error {
	if err := valid.Text("job name", name, 128); err != nil {
		return errs.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func norm(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Claim inserts the run of a slot shard as attempt 1 for owner. It returns
// ErrAlreadyClaimed when the slot exists (whoever inserted it).
func (r *Runs) Claim(ctx context.Context, job string, fire time.Time, shard, total int, owner string) (Run, error) {
	return r.claimAs(ctx, job, fire, shard, total, owner, Running, "")
}

func (r *Runs) claimAs(ctx context.Context, job string, fire time.Time, shard, total int, owner, status, reason string) (Run, error) {
	if err := validJob(job); err != nil {
		return Run{}, err
	}
	if shard < 0 || total <= shard {
		return Run{}, errs.Errorf("%w: job %q shard %d/%d", ErrInvalid, job, shard, total)
	}
	run := Run{Job: job, FireTime: norm(fire), Shard: shard, ShardTotal: total, Owner: owner, sent: time.Now()}
	slot := dialects.JobSlot{Job: job, Fire: run.FireTime, Shard: shard, Total: total, Status: status, Owner: owner, Reason: reason}
	attempt, claimed, err := r.db.Dialect().JobClaim(ctx, r.db.Executor(), slot, r.db.Epochs().Seen())
	if err != nil {
		return Run{}, errs.Errorf("jobs: claim %s@%s: %w", job, run.FireTime.Format(time.RFC3339Nano), r.db.Dialect().Classify(err))
	}
	if !claimed {
		return Run{}, ErrAlreadyClaimed
	}
	if err := core.ObserveEpoch(r.db.Epochs(), attempt.Epoch); err != nil {
		return Run{}, err
	}
	run.Attempt = int(attempt.Value)
	return run, nil
}

// SlotTotal fixes the shard total of job's slot at fire to the number of
// live members of group (package membership; at least 1), counted by the
// database when the slot's first claimant asks, and returns it: every
// caller for the same slot gets the same total, whenever it asks.
func (r *Runs) SlotTotal(ctx context.Context, job string, fire time.Time, group string) (int, error) {
	if err := validJob(job); err != nil {
		return 0, err
	}
	if err := valid.Text("shard group", group, 255); err != nil {
		return 0, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	d := r.db.Dialect()
	f := norm(fire)
	if _, err := r.db.Executor().Exec(ctx, d.Q().JobSlotTotal, job, f, group); err != nil {
		return 0, errs.Errorf("jobs: shard total of %s@%s: %w", job, f.Format(time.RFC3339Nano), d.Classify(err))
	}
	var n int
	if err := r.db.Executor().QueryRow(ctx, d.Q().JobSlotRead, job, f).Scan(&n); err != nil {
		return 0, errs.Errorf("jobs: shard total of %s@%s: %w", job, f.Format(time.RFC3339Nano), d.Classify(err))
	}
	return n, nil
}

// Heartbeat refreshes a running attempt; ErrSuperseded when it is no
// longer the current one.
func (r *Runs) Heartbeat(ctx context.Context, run Run) error {
	n, err := r.db.Executor().Exec(ctx, r.db.Dialect().Q().JobHeartbeat, run.Job, run.FireTime, run.Shard, run.Attempt)
	if err != nil {
		return errs.Errorf("jobs: heartbeat: %w", r.db.Dialect().Classify(err))
	}
	if n == 0 {
		return ErrSuperseded
	}
	return nil
}

// Finish records the outcome of a running attempt (runErr nil: succeeded);
// ErrSuperseded when the attempt was taken over.
func (r *Runs) Finish(ctx context.Context, run Run, runErr error) error {
	status, msg := Succeeded, sql.NullString{}
	if runErr != nil {
		status = Failed
		msg = sql.NullString{String: errText(runErr), Valid: true}
	}
	n, err := r.db.Executor().Exec(ctx, r.db.Dialect().Q().JobFinish, status, msg, run.Job, run.FireTime, run.Shard, run.Attempt)
	if err != nil {
		return errs.Errorf("jobs: finish: %w", r.db.Dialect().Classify(err))
	}
	if n == 0 {
		if done, err := r.completed(ctx, run); err != nil || done {
			return err // completed in the job's own transaction
		}
		return ErrSuperseded
	}
	return nil
}

// Failure is a failed attempt as recorded. Info.Failures counts the
// slot shard's failed attempts including this one.
type Failure struct {
	Info
	Err     error
	Status  string    // Failed (no policy), Retrying or Dead
	RetryAt time.Time // when Status is Retrying
}

// Fail records runErr as the outcome of a running attempt under policy
// p: without a policy (MaxAttempts <= 1) as Finish does ('failed');
// with one, 'retry' with a retry time, or 'dead' when this was the last
// attempt or runErr matches ErrPermanent — the count is the row's.
// ErrSuperseded when the attempt was taken over.
func (r *Runs) Fail(ctx context.Context, run Run, runErr error, p Retry) (Failure, error) {
	f := Failure{Info: Info{Job: run.Job, FireTime: run.FireTime, Shard: run.Shard, ShardTotal: run.ShardTotal,
		Attempt: run.Attempt, Failures: run.Failures}, Err: runErr, Status: Failed}
	if runErr == nil {
		return f, errs.Errorf("%w: Fail needs an error", ErrInvalid)
	}
	if !p.on() {
		f.Failures++
		return f, r.Finish(ctx, run, runErr)
	}
	d := r.db.Dialect()
	n, err := d.JobFail(ctx, r.db.Executor(), dialects.JobFailure{
		Slot: dialects.JobSlot{Job: run.Job, Fire: run.FireTime, Shard: run.Shard}, Attempt: int64(run.Attempt),
		Error: errText(runErr), Permanent: errors.Is(runErr, ErrPermanent), MaxAttempts: p.MaxAttempts,
		BackoffMicros: p.delay(run.Failures + 1).Microseconds(),
	})
	if err != nil {
		return f, errs.Errorf("jobs: record failure: %w", d.Classify(err))
	}
	if n == 0 {
		return f, ErrSuperseded
	}
	var at sql.NullTime
	if err := r.db.Executor().QueryRow(ctx, d.Q().JobOutcome, run.Job, run.FireTime, run.Shard).Scan(&f.Status, &f.Failures, &at); err != nil {
		return f, errs.Errorf("jobs: read failure: %w", d.Classify(err))
	}
	if at.Valid {
		f.RetryAt = at.Time.UTC()
	}
	return f, nil
}

func errText(err error) string {
	m := err.Error()
	if len(m) > 4000 {
		m = m[:4000]
	}
	return m
}

// Fence locks run's row in tx at run's attempt, until tx ends, or returns
// ErrSuperseded when that attempt is no longer the current running one
// (taken over, or already finished). A takeover waits for tx: if tx also
// calls Complete, the takeover then finds the run succeeded and does not
// happen. Call it in the transaction that writes the job's effect, before
// the effect.
//
// tx is drv's transaction type (*sql.Tx, *sqlx.Tx or pgx.Tx): a pool
// there does not compile.
func Fence[TTx any](ctx context.Context, drv sqlcoord.Driver[TTx], tx TTx, run Run) error {
	return NewRuns(drv).fence(ctx, drv.TxExecutor(tx), run)
}

func (r *Runs) fence(ctx context.Context, x dialects.Executor, run Run) error {
	var a int
	q, args := r.db.Dialect().Q().JobFence, []any{run.Job, run.FireTime, run.Shard, run.Attempt}
	hwm := r.db.Epochs().Seen()
	if hwm > 0 && r.db.Dialect().Q().JobFenceChecked != "" {
		q, args = r.db.Dialect().Q().JobFenceChecked, append(args, hwm)
	}
	err := x.QueryRow(ctx, q, args...).Scan(&a)
	if errors.Is(err, sql.ErrNoRows) && hwm > 0 {
		retry, cerr := r.db.Dialect().EpochCheck(ctx, x, hwm)
		if cerr != nil {
			return errs.Errorf("jobs: fence: %w", r.db.Dialect().Classify(cerr))
		}
		if retry {
			err = x.QueryRow(ctx, q, args...).Scan(&a)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return errs.Errorf("jobs: fence %s attempt %d: %w", run.Job, run.Attempt, ErrSuperseded)
	}
	if err != nil {
		return errs.Errorf("jobs: fence: %w", r.db.Dialect().Classify(err))
	}
	return nil
}

// Complete marks run succeeded in tx, the transaction of the job's effect,
// so that effect and completion commit together; ErrSuperseded when the
// attempt is no longer the current running one (then roll tx back).
func Complete[TTx any](ctx context.Context, drv sqlcoord.Driver[TTx], tx TTx, run Run) error {
	return NewRuns(drv).complete(ctx, drv.TxExecutor(tx), run)
}

func (r *Runs) complete(ctx context.Context, x dialects.Executor, run Run) error {
	q, args := r.db.Dialect().Q().JobFinish, []any{Succeeded, sql.NullString{}, run.Job, run.FireTime, run.Shard, run.Attempt}
	if hwm := r.db.Epochs().Seen(); hwm > 0 && r.db.Dialect().Q().JobFinishChecked != "" {
		q, args = r.db.Dialect().Q().JobFinishChecked, append(args, hwm)
	}
	n, err := x.Exec(ctx, q, args...)
	if err == nil && n == 0 && len(args) == 7 { // checked: a stale primary, or no epoch yet?
		retry, cerr := r.db.Dialect().EpochCheck(ctx, x, args[6].(int64))
		if err = cerr; err == nil && retry {
			n, err = x.Exec(ctx, q, args...)
		}
	}
	if err != nil {
		return errs.Errorf("jobs: complete: %w", r.db.Dialect().Classify(err))
	}
	if n == 0 {
		return errs.Errorf("jobs: complete %s attempt %d: %w", run.Job, run.Attempt, ErrSuperseded)
	}
	return nil
}

// completed reports whether run's attempt already succeeded (by Complete
// in the job's own transaction).
func (r *Runs) completed(ctx context.Context, run Run) (bool, error) {
	var status string
	var attempt int
	err := r.db.Executor().QueryRow(ctx, r.db.Dialect().Q().JobGet, run.Job, run.FireTime, run.Shard).Scan(&status, &attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, errs.Errorf("jobs: read run: %w", r.db.Dialect().Classify(err))
	}
	return status == Succeeded && attempt == run.Attempt, nil
}

// TakeOver claims runs of job that are dead (heartbeat older than grace),
// marked for rerun, due to retry, or queued with no earlier run of the job
// left running, retrying or queued — each with its attempt bumped, for
// owner.
func (r *Runs) TakeOver(ctx context.Context, job string, grace time.Duration, owner string) ([]Run, error) {
	won, err := r.takeOver(ctx, job, grace, owner, nil)
	out := make([]Run, len(won))
	for i, t := range won {
		out[i] = t.Run
	}
	return out, err
}

// taken is a run takeOver won, and the status it had: Running (its
// runner stopped heartbeating), Rerun, Retrying or Queued.
type taken struct {
	Run
	From string
}

// takeOver is TakeOver that only tries the candidates accept allows
// (status is the run's status before: running, rerun, retry or queued).
func (r *Runs) takeOver(ctx context.Context, job string, grace time.Duration, owner string, accept func(c Run, status string) bool) ([]taken, error) {
	q := r.db.Dialect().Q()
	rows, err := r.db.Executor().Query(ctx, q.JobStale, job, grace.Microseconds())
	if err != nil {
		return nil, errs.Errorf("jobs: stale runs: %w", r.db.Dialect().Classify(err))
	}
	var cands []taken
	for rows.Next() {
		c := Run{Job: job, Owner: owner}
		var status string
		if err := rows.Scan(&c.FireTime, &c.Shard, &c.ShardTotal, &c.Attempt, &status, &c.Failures); err != nil {
			rows.Close()
			return nil, err
		}
		c.FireTime = norm(c.FireTime)
		if accept == nil || accept(c, status) {
			cands = append(cands, taken{Run: c, From: status})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var won []taken
	for _, t := range cands {
		c := t.Run
		c.sent = time.Now()
		slot := dialects.JobSlot{Job: c.Job, Fire: c.FireTime, Shard: c.Shard, Owner: owner}
		next, ok, err := r.db.Dialect().JobTakeover(ctx, r.db.Executor(), slot, int64(c.Attempt), grace.Microseconds(), r.db.Epochs().Seen())
		if err != nil {
			return won, errs.Errorf("jobs: take over: %w", r.db.Dialect().Classify(err))
		}
		if ok {
			if err := core.ObserveEpoch(r.db.Epochs(), next.Epoch); err != nil {
				return won, err
			}
			c.Attempt = int(next.Value)
			won = append(won, taken{Run: c, From: t.From})
		}
	}
	return won, nil
}

// Definition is a job as a scheduler registered it in coord_jobs.
type Definition struct {
	Name      string    `json:"name"`
	Schedule  string    `json:"schedule"`
	Location  string    `json:"location"`
	Shards    int       `json:"shards"`
	UpdatedAt time.Time `json:"updated_at"` // when a scheduler last registered it
}

// Register records a job's definition in coord_jobs (Scheduler.Run does
// it for every registered job), so that MarkRerun can check slots.
func (r *Runs) Register(ctx context.Context, name string, s *Schedule, shards int) error {
	if err := validJob(name); err != nil {
		return err
	}
	if _, err := r.db.Executor().Exec(ctx, r.db.Dialect().Q().JobRegister, name, s.expr, s.loc.String(), max(shards, 1)); err != nil {
		return errs.Errorf("jobs: register %s: %w", name, r.db.Dialect().Classify(err))
	}
	return nil
}

// Definition returns a registered job; ErrUnknownJob when no scheduler
// registered it.
func (r *Runs) Definition(ctx context.Context, name string) (Definition, *Schedule, error) {
	if err := validJob(name); err != nil {
		return Definition{}, nil, err
	}
	d := Definition{Name: name}
	err := r.db.Executor().QueryRow(ctx, r.db.Dialect().Q().JobDef, name).Scan(&d.Schedule, &d.Location, &d.Shards, &d.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return d, nil, errs.Errorf("jobs: %q: %w (no scheduler has registered it)", name, ErrUnknownJob)
	}
	if err != nil {
		return d, nil, errs.Errorf("jobs: definition: %w", r.db.Dialect().Classify(err))
	}
	s, err := d.Parse()
	return d, s, err
}

// Parse returns the definition's schedule in its time zone.
func (d Definition) Parse() (*Schedule, error) {
	loc, err := time.LoadLocation(d.Location)
	if err != nil {
		return nil, errs.Errorf("jobs: %q: time zone %q: %w", d.Name, d.Location, err)
	}
	return ParseSchedule(d.Schedule, loc)
}

// Jobs lists the registered jobs.
func (r *Runs) Jobs(ctx context.Context) ([]Definition, error) {
	rows, err := r.db.Executor().Query(ctx, r.db.Dialect().Q().JobNames)
	if err != nil {
		return nil, errs.Errorf("jobs: list jobs: %w", r.db.Dialect().Classify(err))
	}
	defer rows.Close()
	var out []Definition
	for rows.Next() {
		var d Definition
		if err := rows.Scan(&d.Name, &d.Schedule, &d.Location, &d.Shards, &d.UpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// OnSchedule reports whether fire is a slot that s produces.
func (s *Schedule) OnSchedule(fire time.Time) bool {
	fire = norm(fire)
	return norm(s.Next(fire.Add(-time.Microsecond))).Equal(fire)
}

// MarkRerun asks for a slot to run again: finished shards are marked
// 'rerun' and shards that never ran get a 'rerun' row; the next scheduler
// tick of any instance running the job runs them. The job must be
// registered (ErrUnknownJob) and fire must be a slot of its schedule
// (ErrNotOnSchedule); total <= 0 takes the registered shard count. It
// returns how many shards were marked.
func (r *Runs) MarkRerun(ctx context.Context, job string, fire time.Time, total int) (int64, error) {
	def, sched, err := r.Definition(ctx, job)
	if err != nil {
		return 0, err
	}
	if !sched.OnSchedule(fire) {
		return 0, errs.Errorf("jobs: %s at %s: %w %s (next slot after it: %s)", job, fire.UTC().Format(time.RFC3339Nano),
			ErrNotOnSchedule, sched, sched.Next(fire).Format(time.RFC3339Nano))
	}
	if total <= 0 {
		total = def.Shards
	}
	q := r.db.Dialect().Q()
	fire = norm(fire)
	n, err := r.db.Executor().Exec(ctx, q.JobRerunMark, job, fire)
	if err != nil {
		return 0, errs.Errorf("jobs: rerun: %w", r.db.Dialect().Classify(err))
	}
	for s := 0; s < total; s++ {
		m, err := r.db.Executor().Exec(ctx, q.JobRerunInsert, job, fire, s, total)
		if err != nil {
			return n, errs.Errorf("jobs: rerun: %w", r.db.Dialect().Classify(err))
		}
		n += m
	}
	return n, nil
}

// List returns the runs of job planned in [from, to).
func (r *Runs) List(ctx context.Context, job string, from, to time.Time) ([]Record, error) {
	rows, err := r.db.Executor().Query(ctx, r.db.Dialect().Q().JobList, job, norm(from), norm(to))
	if err != nil {
		return nil, errs.Errorf("jobs: list: %w", r.db.Dialect().Classify(err))
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		rec := Record{Run: Run{Job: job}}
		if err := rows.Scan(&rec.FireTime, &rec.Shard, &rec.ShardTotal, &rec.Status, &rec.Owner, &rec.Attempt,
			&rec.StartedAt, &rec.HeartbeatAt, &rec.FinishedAt, &rec.Error, &rec.Failures, &rec.RetryAt, &rec.Reason); err != nil {
			return nil, err
		}
		rec.FireTime = rec.FireTime.UTC()
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Missing returns the slots of a schedule in (from, to] that have no
// succeeded run for every shard: never ran, failed, still running or
// skipped.
func (r *Runs) Missing(ctx context.Context, job string, s *Schedule, shards int, from, to time.Time) ([]time.Time, error) {
	recs, err := r.List(ctx, job, from, to.Add(time.Microsecond))
	if err != nil {
		return nil, err
	}
	return MissingIn(recs, s, shards, from, to), nil
}

// MissingIn is Missing over runs already read (recs must cover (from,
// to]; runs outside it are ignored).
func MissingIn(recs []Record, s *Schedule, shards int, from, to time.Time) []time.Time {
	if shards <= 0 {
		shards = 1
	}
	ok := map[time.Time]int{}
	for _, rec := range recs {
		if rec.Status == Succeeded {
			ok[norm(rec.FireTime)]++
		}
	}
	var out []time.Time
	for _, t := range s.Between(from, to, 0) {
		if ok[norm(t)] < shards {
			out = append(out, t)
		}
	}
	return out
}

// LastFire is the newest fire time recorded for job (zero if none).
func (r *Runs) LastFire(ctx context.Context, job string) (time.Time, error) {
	var t sql.NullTime
	if err := r.db.Executor().QueryRow(ctx, r.db.Dialect().Q().JobLastFire, job).Scan(&t); err != nil {
		return time.Time{}, errs.Errorf("jobs: last fire: %w", r.db.Dialect().Classify(err))
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return t.Time.UTC(), nil
}

// Cleanup deletes job's ended runs (succeeded, failed, skipped, dead) fired
// more than age ago, and the shard totals recorded for those slots, batch
// rows per statement (default 1,000), oldest first, and returns how many
// runs it deleted. Nothing else deletes them: call it from a job of its own
// (or a cron) with an age above the longest window anything reads — the
// missed-slot scan looks back CatchUpMax slots, `jobs list` and the console
// show what is left. A run still running, retrying, queued or marked for a
// rerun is never deleted, whatever its age.
//
// Each statement walks the primary key (job, fire_time, shard) from the
// oldest slot and stops after its batch, so it locks the old rows it
// deletes and not the job's recent runs (on PostgreSQL it skips rows
// someone holds).
func (r *Runs) Cleanup(ctx context.Context, job string, age time.Duration, batch int) (int64, error) {
	if err := validJob(job); err != nil {
		return 0, err
	}
	if age < 0 {
		return 0, errs.Errorf("jobs: cleanup: %w", sqlutil.ErrNegativeAge)
	}
	if batch <= 0 {
		batch = 1000
	}
	q := r.db.Dialect().Q()
	del := func(stmt string) (int64, error) {
		n, err := sqlutil.InBatches(ctx, r.db, sqlutil.Pace(r.db.CleanupPace()), batch, func(ctx context.Context, x dialects.Executor) (int64, error) {
			return x.Exec(ctx, stmt, job, age.Microseconds(), batch)
		})
		if err != nil {
			return n, errs.Errorf("jobs: cleanup %s: %w", job, err)
		}
		return n, nil
	}
	n, err := del(q.JobCleanup)
	if err != nil {
		return n, err
	}
	_, err = del(q.JobSlotCleanup)
	return n, err
}
