package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/metrics"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/internal/keepalive"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Missed says what a scheduler does on start with slots planned while no
// instance was running (found from the newest recorded fire time).
type Missed int

const (
	// SkipMissed ignores them (default).
	SkipMissed Missed = iota
	// RunLatest runs only the newest missed slot.
	RunLatest
	// CatchUp runs up to Job.CatchUpMax of the newest missed slots.
	CatchUp
)

// Overlap says what happens to a slot while the job's previous run is
// still going.
type Overlap int

const (
	// AllowOverlap runs it anyway (default).
	AllowOverlap Overlap = iota
	// SkipOverlap records the slot as skipped (the claim still goes
	// through the unique index, so every instance agrees).
	SkipOverlap
	// Queue records the slot as queued and runs it when every earlier run
	// of the job has ended (none running, waiting to retry or queued),
	// slots in fire order. The start is a takeover (attempt + 1) that only
	// the earliest queued slot is offered, so two instances cannot start
	// two queued slots at once.
	Queue
)

// Info is what a job function is told about its run.
type Info struct {
	Job        string
	FireTime   time.Time // the planned time, not when it started
	Shard      int
	ShardTotal int
	Attempt    int // the fencing token: it grows with every takeover, retry or rerun
	Failures   int // earlier attempts of this slot shard that failed (retry policy)

	runs *Runs
}

// Run returns the attempt this Info describes.
func (i Info) Run() Run {
	return Run{Job: i.Job, FireTime: i.FireTime, Shard: i.Shard, ShardTotal: i.ShardTotal, Attempt: i.Attempt, Failures: i.Failures}
}

// To fence a job's effect: jobs.Fence(ctx, drv, tx, info.Run()) first in
// the transaction that writes it, jobs.Complete(ctx, drv, tx, info.Run())
// last, then commit.

// Job is a scheduled job.
type Job struct {
	Name     string
	Schedule string         // cron expression, optional seconds field
	Location *time.Location // nil: UTC
	// Run does the work. Its context is cancelled when the run is
	// superseded (cause ErrSuperseded), times out, or the scheduler stops.
	Run func(ctx context.Context, info Info) error
	// Shards splits each slot into independently claimed parts (default 1).
	Shards int
	// ShardConcurrency is how many shards of the job one instance runs at
	// once (default 1). An instance claims a slot's shards one by one,
	// from a random shard on, only when it has room to run one, so the
	// shards spread over every instance running the job: with n instances
	// a slot takes about 1/n of the time one instance takes. Shards left
	// unclaimed (every instance stopped mid-slot) are claimed by the next
	// instance's scan, up to a day later. Jobs with a ShardGroup and
	// Options.MemberID claim their own shard first instead.
	ShardConcurrency int
	// ShardGroup, if set, replaces Shards: each slot has as many shards as
	// the membership group (package membership) has live members at the
	// slot's fire time — XXL-JOB's shard broadcast. The total is recorded
	// once per slot (coord_job_slots), so every shard of the slot agrees
	// on it even if members join or leave meanwhile; each shard is still
	// claimed exactly once. An empty group gives one shard.
	ShardGroup string
	Missed     Missed
	CatchUpMax int
	Overlap    Overlap
	// Timeout bounds one run (0: none).
	Timeout time.Duration
	// Grace: a run whose heartbeat is older than this is dead and may be
	// taken over; default 30s. Heartbeats go every Grace/3.
	Grace time.Duration
	// Retry retries a run that returned an error (see Retry); zero: none.
	Retry Retry
	// OnFailure, if set, is called after a failed run was recorded
	// (Failed, Retrying or Dead), on the instance that ran it — the place
	// for an alert. Not called for a superseded run. A panic in it is
	// logged.
	OnFailure func(ctx context.Context, f Failure)

	sched *Schedule
	st    *jobState
}

// jobState is a registered job's state in one scheduler.
type jobState struct {
	room     chan struct{} // ShardConcurrency tokens
	mu       sync.Mutex
	sweeping map[time.Time]bool // slots this instance is claiming shards of
}

// Options tune a Scheduler.
type Options struct {
	// Owner names this instance in coord_job_runs; default coord.NewOwnerID().
	Owner string
	// Tick is how often due slots are checked; default 100ms.
	Tick time.Duration
	// Clock is this instance's clock; default time.Now. The fire times
	// come from the schedule, so a skewed clock only changes when an
	// instance tries, never how many runs a slot gets.
	Clock func() time.Time
	// Logger receives warnings (failed claims, refused completions) and,
	// at Info, takeovers. Default: warnings and errors to stderr.
	Logger *slog.Logger
	// MemberID is this instance's id in the membership groups of its
	// ShardGroup jobs (membership.Membership.ID). With it, each member
	// first claims only its own shard — index = its rank among the live
	// members, by id — and claims the others only after SpreadDelay, when
	// their members have had their turn (shards of members gone or of
	// ranks past the total). Without it, the first instance to reach a
	// slot claims every shard.
	MemberID string
	// SpreadDelay: see MemberID; default 1s. It must exceed the clock
	// skew between instances: a member whose clock runs behind reaches a
	// slot that much later.
	SpreadDelay time.Duration
}

// Scheduler runs registered jobs. Start one per process; any number of
// processes may run the same jobs.
type Scheduler struct {
	runs  *Runs
	opt   Options
	jobs  []*Job
	wg    sync.WaitGroup
	log   *slog.Logger
	fatal func(error) // stops Run on a fatal error

	mu   sync.Mutex
	scan map[string]time.Time // job → when to scan it for takeovers next (a retry due, a queue to advance)
}

// NewScheduler returns a scheduler on db.
func NewScheduler(db sqlcoord.Base, opt Options) *Scheduler {
	if opt.Owner == "" {
		opt.Owner = coord.NewOwnerID()
	}
	if opt.Tick <= 0 {
		opt.Tick = 100 * time.Millisecond
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.SpreadDelay <= 0 {
		opt.SpreadDelay = time.Second
	}
	l := opt.Logger
	if l == nil {
		l = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &Scheduler{runs: NewRuns(db), opt: opt, log: l}
}

// Register adds a job; call before Run.
func (s *Scheduler) Register(j Job) error {
	if err := validJob(j.Name); err != nil {
		return err
	}
	if j.Run == nil {
		return errs.Errorf("%w: job %q has no Run function", ErrInvalid, j.Name)
	}
	sc, err := ParseSchedule(j.Schedule, j.Location)
	if err != nil {
		return err
	}
	if j.Shards <= 0 {
		j.Shards = 1
	}
	if j.ShardGroup != "" {
		if err := valid.Text("shard group", j.ShardGroup, 255); err != nil {
			return errs.Errorf("%w: job %q: %w", ErrInvalid, j.Name, err)
		}
	}
	if j.Grace < 0 {
		return errs.Errorf("%w: job %q: negative grace %v", ErrInvalid, j.Name, j.Grace)
	}
	if j.Grace == 0 {
		j.Grace = 30 * time.Second
	}
	if j.Timeout < 0 || j.CatchUpMax < 0 {
		return errs.Errorf("%w: negative timeout or catch-up", ErrInvalid)
	}
	if j.Retry.MaxAttempts < 0 || j.Retry.BaseBackoff < 0 || j.Retry.MaxBackoff < 0 {
		return errs.Errorf("%w: job %q: negative retry attempts or backoff", ErrInvalid, j.Name)
	}
	if j.Retry.BaseBackoff == 0 {
		j.Retry.BaseBackoff = time.Second
	}
	if j.Retry.MaxBackoff == 0 {
		j.Retry.MaxBackoff = 5 * time.Minute
	}
	if j.Overlap < AllowOverlap || j.Overlap > Queue || j.Missed < SkipMissed || j.Missed > CatchUp {
		return errs.Errorf("%w: job %q: unknown overlap or missed policy", ErrInvalid, j.Name)
	}
	if j.ShardConcurrency < 0 {
		return errs.Errorf("%w: job %q: negative ShardConcurrency", ErrInvalid, j.Name)
	}
	j.sched = sc
	j.st = &jobState{room: make(chan struct{}, max(j.ShardConcurrency, 1)), sweeping: map[time.Time]bool{}}
	s.jobs = append(s.jobs, &j)
	return nil
}

// Runs exposes the low-level run table API.
func (s *Scheduler) Runs() *Runs { return s.runs }

// Run schedules until ctx ends (then it returns nil) or a fatal condition
// stops it, then waits for running jobs (whose contexts are cancelled) to
// return. It first records every job in coord_jobs; that, and any later
// statement, failing because the schema is missing (sqlcoord.ErrNoSchema),
// the server is read-only (sqlcoord.ErrReadOnly) or access is denied
// (sqlcoord.ErrAccessDenied) ends Run with that error: retrying cannot fix
// it. Other failures (a lost connection) are logged and retried.
func (s *Scheduler) Run(ctx context.Context) error {
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	s.fatal = func(err error) {
		if sqlcoord.Fatal(err) {
			s.log.Error("scheduler stopping", "err", err)
			stop(err)
		}
	}
	err := s.loop(rctx)
	s.wg.Wait()
	if c := context.Cause(rctx); c != nil && ctx.Err() == nil && !errors.Is(c, context.Canceled) {
		return errs.Errorf("jobs: scheduler stopped: %w", c)
	}
	return err
}

func (s *Scheduler) loop(ctx context.Context) error {
	for _, j := range s.jobs {
		if err := s.runs.Register(ctx, j.Name, j.sched, j.Shards); err != nil {
			return err
		}
	}
	next := make([]time.Time, len(s.jobs))
	now := s.opt.Clock()
	for i, j := range s.jobs {
		next[i] = j.sched.Next(now)
		if err := s.startupMissed(ctx, j, now); err != nil {
			s.log.Warn("missed slots", "job", j.Name, "err", err)
			s.fatal(err)
		}
	}
	lastScan := time.Time{}
	t := time.NewTicker(s.opt.Tick)
	defer t.Stop()
	for {
		now := s.opt.Clock()
		for i, j := range s.jobs {
			for !next[i].IsZero() && !next[i].After(now) {
				s.fire(ctx, j, next[i])
				next[i] = j.sched.Next(next[i])
			}
		}
		all := time.Since(lastScan) >= s.minGrace()/3
		if all {
			lastScan = time.Now()
		}
		for _, j := range s.jobs {
			if all || s.scanDue(j, lastScan) {
				s.takeOver(ctx, j)
			}
			if all {
				s.sweepPartial(ctx, j)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// minGrace bounds the interval of the takeover scan of every job: a
// third of the shortest grace, and at most 5 s when a job retries or
// queues (another instance's retries and queued slots are found then;
// this instance's own are scanned for when they are due).
func (s *Scheduler) minGrace() time.Duration {
	g := time.Hour
	for _, j := range s.jobs {
		g = min(g, j.Grace)
		if j.Retry.on() || j.Overlap == Queue {
			g = min(g, 15*time.Second)
		}
	}
	return g
}

// scanAt asks for a takeover scan of j at t (a retry due then, or a queue
// that may move now).
func (s *Scheduler) scanAt(j *Job, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scan == nil {
		s.scan = map[string]time.Time{}
	}
	if cur, ok := s.scan[j.Name]; !ok || t.Before(cur) {
		s.scan[j.Name] = t
	}
}

// scanDue reports (and forgets) a scan of j asked for by now; one that a
// full scan at or after it made needless is forgotten too.
func (s *Scheduler) scanDue(j *Job, lastFull time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.scan[j.Name]
	if !ok || time.Now().Before(t) {
		return false
	}
	delete(s.scan, j.Name)
	return t.After(lastFull)
}

// maxMissedRecorded bounds how many missed slots a start records.
const maxMissedRecorded = 1000

// startupMissed runs the missed slots the job's policy asks for and
// records the others as skipped with the reason: the newest 1,000 of
// them planned more than Grace before now (a slot planned since may still
// be claimed by an instance that is running; a skipped record would keep
// it from running).
func (s *Scheduler) startupMissed(ctx context.Context, j *Job, now time.Time) error {
	last, err := s.runs.LastFire(ctx, j.Name)
	if err != nil || last.IsZero() {
		return err
	}
	run := 0
	switch j.Missed {
	case RunLatest:
		run = 1
	case CatchUp:
		run = max(j.CatchUpMax, 1)
	}
	slots := j.sched.Between(last, now, maxMissedRecorded+run)
	cut := max(len(slots)-run, 0)
	reason := "missed: no scheduler was running (Missed: SkipMissed)"
	if run > 0 {
		reason = fmt.Sprintf("missed: no scheduler was running, older than the %d newest missed slot(s) run at start", run)
	}
	shards := j.Shards
	if j.ShardGroup != "" {
		shards = 1 // the group's size then is unknown: one record per slot
	}
	for _, f := range slots[:cut] {
		if f.After(now.Add(-j.Grace)) {
			break
		}
		for shard := 0; shard < shards; shard++ {
			if _, err := s.runs.claimAs(ctx, j.Name, f, shard, shards, s.opt.Owner, Skipped, reason); err != nil && !errors.Is(err, ErrAlreadyClaimed) {
				return err
			}
		}
	}
	for _, f := range slots[cut:] {
		s.fire(ctx, j, f)
	}
	return nil
}

// fire claims every shard of a slot and runs the ones this instance won.
func (s *Scheduler) fire(ctx context.Context, j *Job, fire time.Time) {
	status, reason := s.overlap(ctx, j, fire)
	total := j.Shards
	if j.ShardGroup != "" {
		n, err := s.runs.SlotTotal(ctx, j.Name, fire, j.ShardGroup)
		if err != nil {
			s.log.Warn("shard total", "job", j.Name, "fire", fire, "group", j.ShardGroup, "err", err)
			s.fatal(err)
			return
		}
		total = n
	}
	if j.ShardGroup != "" && s.opt.MemberID != "" {
		rank := s.rank(ctx, j.ShardGroup)
		if rank >= 0 && rank < total {
			s.claim(ctx, j, fire, rank, total, status, reason)
		}
		// the others' turn first; then whatever is left
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTimer(s.opt.SpreadDelay)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for shard := 0; shard < total; shard++ {
				if shard != rank {
					s.claim(ctx, j, fire, shard, total, status, reason)
				}
			}
		}()
		return
	}
	if status != Running || total == 1 {
		for shard := 0; shard < total; shard++ {
			s.claim(ctx, j, fire, shard, total, status, reason)
		}
		return
	}
	s.sweep(ctx, j, fire, total)
}

// sweep claims the unclaimed shards of a slot one by one, from a random
// shard on, each only when this instance has room to run it
// (ShardConcurrency), so that instances share the slot's shards.
func (s *Scheduler) sweep(ctx context.Context, j *Job, fire time.Time, total int) {
	fire = norm(fire)
	j.st.mu.Lock()
	if j.st.sweeping[fire] {
		j.st.mu.Unlock()
		return
	}
	j.st.sweeping[fire] = true
	j.st.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { j.st.mu.Lock(); delete(j.st.sweeping, fire); j.st.mu.Unlock() }()
		off := rand.IntN(total)
		for i := 0; i < total; i++ {
			select {
			case j.st.room <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if !s.claimThen(ctx, j, fire, (off+i)%total, total, Running, "", func() { <-j.st.room }) {
				<-j.st.room // not ours to run
			}
		}
	}()
}

// sweepPartial starts a sweep of the job's slots of the last day that
// have fewer shard runs than shards (their instances stopped mid-slot),
// planned at least SpreadDelay + Grace ago.
func (s *Scheduler) sweepPartial(ctx context.Context, j *Job) {
	if j.Shards <= 1 && j.ShardGroup == "" {
		return
	}
	// Old enough that the slot's members had their turn (SpreadDelay) and
	// a claim in flight has landed.
	age := s.opt.SpreadDelay + j.Grace
	rows, err := s.runs.db.Executor().Query(ctx, s.runs.db.Dialect().Q().JobPartial, j.Name, age.Microseconds())
	if err != nil {
		s.log.Warn("partly claimed slots", "job", j.Name, "err", err)
		s.fatal(err)
		return
	}
	type slot struct {
		fire  time.Time
		total int
	}
	var todo []slot
	for rows.Next() {
		var sl slot
		if err := rows.Scan(&sl.fire, &sl.total); err != nil {
			break
		}
		todo = append(todo, sl)
	}
	rows.Close()
	for _, sl := range todo {
		s.sweep(ctx, j, sl.fire, sl.total)
	}
}

// overlap applies the job's overlap policy to a slot: the status and
// reason its claims record. A failed check runs the slot (logged).
func (s *Scheduler) overlap(ctx context.Context, j *Job, fire time.Time) (status, reason string) {
	q, args := "", []any{j.Name, norm(fire)}
	switch j.Overlap {
	case SkipOverlap:
		q, args = s.runs.db.Dialect().Q().JobOverlap, append(args, j.Grace.Microseconds())
		status, reason = Skipped, "overlap: an earlier run was still running (Overlap: SkipOverlap)"
	case Queue:
		q = s.runs.db.Dialect().Q().JobQueued
		status, reason = Queued, "overlap: queued behind an earlier run still running, retrying or queued (Overlap: Queue)"
	default:
		return Running, ""
	}
	var n int
	if err := s.runs.db.Executor().QueryRow(ctx, q, args...).Scan(&n); err != nil {
		s.log.Warn("overlap check failed; running the slot", "job", j.Name, "fire", fire, "err", err)
		return Running, ""
	}
	if n == 0 {
		return Running, ""
	}
	return status, reason
}

// rank is this instance's index among group's live members by id, or -1.
func (s *Scheduler) rank(ctx context.Context, group string) int {
	ms, err := membership.Members(ctx, s.runs.db, group)
	if err != nil {
		s.log.Warn("member list", "group", group, "err", err)
		return -1
	}
	return slices.IndexFunc(ms, func(m membership.Member) bool { return m.ID == s.opt.MemberID })
}

// claim claims one shard of a slot and runs it when this instance won.
func (s *Scheduler) claim(ctx context.Context, j *Job, fire time.Time, shard, total int, status, reason string) {
	s.claimThen(ctx, j, fire, shard, total, status, reason, nil)
}

// claimThen is claim calling done (if set) when the run it started has
// ended; it reports whether it started one (done is not called otherwise).
func (s *Scheduler) claimThen(ctx context.Context, j *Job, fire time.Time, shard, total int, status, reason string, done func()) bool {
	run, err := s.runs.claimAs(ctx, j.Name, fire, shard, total, s.opt.Owner, status, reason)
	if errors.Is(err, ErrAlreadyClaimed) {
		return false
	}
	if err != nil {
		s.log.Warn("claim", "job", j.Name, "fire", fire, "shard", shard, "err", err)
		s.fatal(err)
		return false
	}
	if status != Running {
		return false // skipped, or queued: a takeover scan starts it
	}
	s.startThen(ctx, j, run, done)
	return true
}

func (s *Scheduler) takeOver(ctx context.Context, j *Job) {
	won, err := s.runs.takeOver(ctx, j.Name, j.Grace, s.opt.Owner, func(c Run, status string) bool {
		if status == Rerun && !j.sched.OnSchedule(c.FireTime) {
			s.log.Warn("rerun refused: not a slot of the schedule", "job", j.Name, "fire", c.FireTime, "schedule", j.sched.String())
			return false
		}
		return true
	})
	if err != nil {
		s.log.Warn("take over", "job", j.Name, "err", err)
		s.fatal(err)
	}
	for _, t := range won {
		switch t.From {
		case Running:
			metrics.Of(s.runs.db).JobTakeover(j.Name)
			s.log.Info("took over run", "job", j.Name, "fire", t.FireTime, "shard", t.Shard, "attempt", t.Attempt)
		case Retrying:
			s.log.Info("retrying run", "job", j.Name, "fire", t.FireTime, "shard", t.Shard, "attempt", t.Attempt, "failures", t.Failures)
		default:
			s.log.Info("starting "+t.From+" run", "job", j.Name, "fire", t.FireTime, "shard", t.Shard, "attempt", t.Attempt)
		}
		s.start(ctx, j, t.Run)
	}
}

// start runs the job with heartbeats; a refused heartbeat cancels it.
func (s *Scheduler) start(ctx context.Context, j *Job, run Run) { s.startThen(ctx, j, run, nil) }

// startThen is start calling done (if set) when the run has ended.
func (s *Scheduler) startThen(ctx context.Context, j *Job, run Run, done func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if done != nil {
			defer done()
		}
		// One keep-alive (internal/keepalive): heartbeats every Grace/3;
		// the run's context ends when one is refused (taken over) or when
		// none has succeeded for Grace counted from the send time of the
		// last good one — from then on another instance may take over.
		sent := run.sent
		if sent.IsZero() {
			sent = time.Now()
		}
		loop, lerr := keepalive.Start(ctx, sent, keepalive.Options{
			TTL:      j.Grace,
			Interval: j.Grace / 3,
			Renew:    func(hctx context.Context) error { return s.runs.Heartbeat(hctx, run) },
			Lost:     func(err error) bool { return errors.Is(err, ErrSuperseded) },
			Expired: func(last error) error {
				return errs.Errorf("%w: no heartbeat succeeded within the grace (%v): %v", ErrSuperseded, j.Grace, last)
			},
		})
		if lerr != nil {
			s.log.Error("run not started", "job", j.Name, "err", lerr)
			return
		}
		defer loop.Stop()
		rctx := loop.Context()
		if j.Timeout > 0 {
			var c context.CancelFunc
			rctx, c = context.WithTimeout(rctx, j.Timeout)
			defer c()
		}
		began := time.Now()
		err := safeRun(rctx, s.runs, j, run)
		if c := context.Cause(loop.Context()); errors.Is(c, ErrSuperseded) {
			err = c
		}
		loop.Stop()
		took := time.Since(began)
		if j.Overlap == Queue {
			defer s.scanAt(j, time.Now()) // the next queued slot may start
		}
		outcome := runOutcome(err)
		defer func() { metrics.Of(s.runs.db).JobRun(j.Name, outcome, sent.Sub(run.FireTime), took) }()
		if errors.Is(err, ErrSuperseded) {
			s.log.Warn("run superseded", "job", j.Name, "fire", run.FireTime, "attempt", run.Attempt)
			return
		}
		if err != nil && j.Retry.on() && ctx.Err() != nil {
			// The scheduler is stopping: not the job's failure. The run
			// stays running; its heartbeat stops, and after the grace
			// another instance takes it over without counting a failure.
			outcome = "canceled"
			return
		}
		fctx, fc := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer fc()
		if err == nil {
			if ferr := s.runs.Finish(fctx, run, nil); ferr != nil {
				s.log.Warn("finish refused", "job", j.Name, "fire", run.FireTime, "attempt", run.Attempt, "err", ferr)
			}
			return
		}
		f, ferr := s.runs.Fail(fctx, run, err, j.Retry)
		if ferr != nil {
			s.log.Warn("recording the failure refused", "job", j.Name, "fire", run.FireTime, "attempt", run.Attempt, "err", ferr)
			return
		}
		if j.Retry.on() {
			outcome = f.Status
		}
		switch f.Status {
		case Retrying:
			s.scanAt(j, f.RetryAt)
			s.log.Warn("run failed; will retry", "job", j.Name, "fire", run.FireTime, "shard", run.Shard, "failures", f.Failures, "retry_at", f.RetryAt, "err", err)
		case Dead:
			s.log.Error("run dead", "job", j.Name, "fire", run.FireTime, "shard", run.Shard, "failures", f.Failures, "err", err)
		}
		s.onFailure(fctx, j, f)
	}()
}

// onFailure calls the job's OnFailure hook; a panic in it is logged.
func (s *Scheduler) onFailure(ctx context.Context, j *Job, f Failure) {
	if j.OnFailure == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("OnFailure panicked", "job", j.Name, "panic", p)
		}
	}()
	j.OnFailure(ctx, f)
}

// runOutcome names how a run ended, for metrics.
func runOutcome(err error) string {
	switch {
	case err == nil:
		return Succeeded
	case errors.Is(err, ErrSuperseded):
		return "superseded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return Failed
}

func safeRun(ctx context.Context, runs *Runs, j *Job, run Run) (err error) {
	ctx, end := tracing.Start(ctx, runs.db, "job.run", runs.db.Dialect(), attribute.String("sqlcoord.job", run.Job),
		attribute.Int("sqlcoord.shard", run.Shard), attribute.Int("sqlcoord.attempt", run.Attempt))
	defer func() { end(err) }()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: %s panicked: %v", j.Name, p)
		}
	}()
	return j.Run(ctx, Info{Job: run.Job, FireTime: run.FireTime, Shard: run.Shard, ShardTotal: run.ShardTotal, Attempt: run.Attempt, Failures: run.Failures, runs: runs})
}
