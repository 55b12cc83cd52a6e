package ids

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/keepalive"
	"github.com/sqlcoord/sqlcoord/txn"
)

var (
	// ErrClockBackwards: the clock went back further than MaxRollback.
	ErrClockBackwards = errors.New("ids: clock moved backwards")
	// ErrClockBehind: at start, the clock is behind the newest timestamp
	// recorded for the leased worker id; issuing would risk duplicates.
	ErrClockBehind = errors.New("ids: clock is behind the worker id's last timestamp")
	// ErrNoWorkerID: every worker id is leased to a live node.
	ErrNoWorkerID = errors.New("ids: no free worker id")
	// ErrWorkerLost: the worker-id lease was lost (expired or taken); the
	// generator stopped issuing ids.
	ErrWorkerLost = errors.New("ids: worker id lease lost")
	// ErrEpochGrace: the database started a new failover epoch (a
	// promotion, a restore) less than a lease TTL + margin ago, and no
	// worker id is granted before that has passed — a holder whose grant
	// was lost with the old history may still be issuing ids. The error
	// is a *GraceError saying when to retry; LeaseWorker returns it only
	// when ctx would end before then (otherwise it waits).
	ErrEpochGrace = errors.New("ids: no worker id yet: the database's failover epoch is new")
)

// Layout is the bit split of a snowflake id: 1 sign bit (always 0), then
// TimeBits of milliseconds since Epoch, WorkerBits, SeqBits.
type Layout struct {
	TimeBits, WorkerBits, SeqBits uint
	Epoch                         time.Time
}

// GraceError is ErrEpochGrace with the time left (by the database's
// clock) until worker ids are granted in the new epoch.
type GraceError struct {
	RetryAfter time.Duration
	Epoch      int64
}

func (e *GraceError) Error() string {
	return fmt.Sprintf("%v (epoch %d): retry after %v", ErrEpochGrace, e.Epoch, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrEpochGrace) true.
func (e *GraceError) Is(target error) bool { return target == ErrEpochGrace }

// DefaultLayout is 41/10/12 with epoch 2024-01-01 UTC (about 69 years).
var DefaultLayout = Layout{TimeBits: 41, WorkerBits: 10, SeqBits: 12, Epoch: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}

// Validate checks that the layout fills 63 bits.
func (l Layout) Validate() error {
	if l.TimeBits+l.WorkerBits+l.SeqBits != 63 || l.TimeBits < 30 || l.WorkerBits < 1 || l.SeqBits < 1 {
		return errs.Errorf("%w: layout %d/%d/%d must add up to 63 with at least 30 time bits", ErrInvalid, l.TimeBits, l.WorkerBits, l.SeqBits)
	}
	if l.Epoch.IsZero() {
		return errs.Errorf("%w: layout needs an epoch", ErrInvalid)
	}
	return nil
}

// MaxWorkers is 2^WorkerBits.
func (l Layout) MaxWorkers() int { return 1 << l.WorkerBits }

// Decoded is an id taken apart.
type Decoded struct {
	Time     time.Time
	Worker   int64
	Sequence int64
}

// Decode splits an id made with this layout.
func (l Layout) Decode(id int64) Decoded {
	seq := id & (1<<l.SeqBits - 1)
	worker := (id >> l.SeqBits) & (1<<l.WorkerBits - 1)
	ms := id >> (l.SeqBits + l.WorkerBits)
	return Decoded{Time: l.Epoch.Add(time.Duration(ms) * time.Millisecond), Worker: worker, Sequence: seq}
}

// SnowflakeOptions tune a Snowflake.
type SnowflakeOptions struct {
	Layout Layout // zero value: DefaultLayout
	// MaxRollback is the largest backwards clock step Next waits out;
	// beyond it Next fails with ErrClockBackwards. Default 5ms.
	MaxRollback time.Duration
	// Clock returns the current time; default time.Now. For tests.
	Clock func() time.Time
	// RandomStart, when above 0, starts each millisecond's sequence at a
	// random value in [0, RandomStart) instead of 0 (Leaf's fix): under
	// low traffic — one id per millisecond — the low bits of the ids are
	// otherwise always 0, and sharding by id % n puts every id in shard 0.
	// Choose a multiple of the shard count (and of 2) so that id % n is
	// uniform. It costs capacity: a millisecond issues 2^SeqBits − start
	// ids before Next waits for the next one, on average RandomStart/2
	// fewer (with the default 12 sequence bits and RandomStart 256, 3.1 %
	// of the 4,096 per millisecond). At most 2^SeqBits / 2.
	RandomStart int
}

// Snowflake generates ids for one worker id. Next is safe for concurrent
// use; ids are unique for the worker and strictly increasing across all
// calls on this generator.
type Snowflake struct {
	l       Layout
	worker  int64
	maxRB   int64 // ms
	clock   func() time.Time
	mu      sync.Mutex
	lastMs  int64
	seq     int64
	seqMask int64
	maxMs   int64
	random  int64 // RandomStart
	stopped error
	// valid, when set (leased worker ids), must return nil for Next to
	// issue an id: the worker-id lease is certainly still held.
	valid func() error
}

// NewSnowflake returns a generator for a worker id you assign yourself (for
// leased worker ids, use LeaseWorker). floor is a timestamp (ms since the
// layout's epoch) that ids must stay above, e.g. the last one issued by a
// previous run; 0 for none.
func NewSnowflake(worker int64, floor int64, opt SnowflakeOptions) (*Snowflake, error) {
	if opt.Layout == (Layout{}) {
		opt.Layout = DefaultLayout
	}
	if err := opt.Layout.Validate(); err != nil {
		return nil, err
	}
	if worker < 0 || worker >= int64(opt.Layout.MaxWorkers()) {
		return nil, errs.Errorf("%w: worker id %d outside 0..%d", ErrInvalid, worker, opt.Layout.MaxWorkers()-1)
	}
	if opt.MaxRollback < 0 {
		return nil, errs.Errorf("%w: negative MaxRollback", ErrInvalid)
	}
	if opt.MaxRollback == 0 {
		opt.MaxRollback = 5 * time.Millisecond
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.RandomStart < 0 || opt.RandomStart > 1<<(opt.Layout.SeqBits-1) {
		return nil, errs.Errorf("%w: RandomStart %d outside 0..%d (half the sequence)", ErrInvalid, opt.RandomStart, 1<<(opt.Layout.SeqBits-1))
	}
	s := &Snowflake{l: opt.Layout, worker: worker, maxRB: opt.MaxRollback.Milliseconds(), clock: opt.Clock,
		seqMask: 1<<opt.Layout.SeqBits - 1, maxMs: 1<<opt.Layout.TimeBits - 1, random: int64(opt.RandomStart)}
	now := s.now()
	if now < floor-s.maxRB {
		return nil, errs.Errorf("%w: clock at %d ms, last recorded %d ms (%v behind)", ErrClockBehind, now, floor, time.Duration(floor-now)*time.Millisecond)
	}
	s.lastMs = floor
	s.seq = s.seqMask // the next id moves past floor
	return s, nil
}

func (s *Snowflake) now() int64 { return s.clock().Sub(s.l.Epoch).Milliseconds() }

// start is the first sequence value of a new millisecond.
func (s *Snowflake) start() int64 {
	if s.random == 0 {
		return 0
	}
	return rand.Int64N(s.random)
}

// Worker is the generator's worker id.
func (s *Snowflake) Worker() int64 { return s.worker }

// LastMs is the timestamp (ms since epoch) of the newest id issued.
func (s *Snowflake) LastMs() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastMs
}

// Next returns a new id. When 2^SeqBits ids were issued in the current
// millisecond it waits for the next; a backwards clock step up to
// MaxRollback is waited out, a larger one returns ErrClockBackwards. It
// never returns a duplicate and never silently resets.
func (s *Snowflake) Next() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return 0, s.stopped
	}

	now := s.now()
	if now < s.lastMs {
		if s.lastMs-now > s.maxRB {
			return 0, errs.Errorf("%w by %v (more than %v)", ErrClockBackwards, time.Duration(s.lastMs-now)*time.Millisecond, time.Duration(s.maxRB)*time.Millisecond)
		}
		for now < s.lastMs {
			time.Sleep(100 * time.Microsecond)
			now = s.now()
		}
	}
	if now == s.lastMs {
		s.seq++
		if s.seq > s.seqMask { // sequence exhausted: wait for the next millisecond
			// Spin, yielding: a timer sleep of a few µs returns after
			// about a millisecond on Linux, which halved the rate at the
			// 4,096-ids-per-millisecond cap.
			for now <= s.lastMs {
				runtime.Gosched()
				now = s.now()
			}
			s.seq = s.start()
		}
	} else {
		s.seq = s.start()
	}
	if now > s.maxMs {
		return 0, errs.Errorf("%w: time bits exhausted (epoch %v)", ErrInvalid, s.l.Epoch)
	}
	// Checked on every id, after the clock was read for it: if the lease
	// is valid now, it was when the id's timestamp was taken, so even a
	// freeze right after this check cannot yield an id stamped at a time
	// when another node may hold this worker id.
	if s.valid != nil {
		if err := s.valid(); err != nil {
			return 0, err
		}
	}
	s.lastMs = now
	return now<<(s.l.WorkerBits+s.l.SeqBits) | s.worker<<s.l.SeqBits | s.seq, nil
}

func (s *Snowflake) stop(err error) {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = err
	}
	s.mu.Unlock()
}

// WorkerOptions tune LeaseWorker.
type WorkerOptions struct {
	SnowflakeOptions
	// TTL of the worker-id lease; default 30s. Heartbeats every TTL/3.
	TTL time.Duration
	// Margin after expiry before an abandoned worker id is reused;
	// default TTL. It absorbs clock-rate differences and a holder's last
	// in-flight ids.
	Margin time.Duration
	// MaxWorkers caps the worker ids handed out (default: the layout's).
	MaxWorkers int
	// Owner id; default a random coord.NewOwnerID().
	Owner string
}

// Worker is a leased worker id with its generator. The generator stops
// issuing ids (ErrWorkerLost) before the lease could expire if heartbeats
// fail, so that a reused worker id never overlaps a live one.
type Worker struct {
	*Snowflake
	db    sqlcoord.Base
	id    int64
	owner string
	opt   WorkerOptions
	loop  *keepalive.Loop
}

// LeaseWorker leases a free worker id from coord_id_workers (one that was
// never used, was released, or whose lease expired more than Margin ago),
// refuses to start if the local clock is behind the timestamps recorded
// for it, and heartbeats until Close.
func LeaseWorker[TTx any](ctx context.Context, db sqlcoord.Driver[TTx], opt WorkerOptions) (*Worker, error) {
	if opt.Layout == (Layout{}) {
		opt.Layout = DefaultLayout
	}
	if err := opt.Layout.Validate(); err != nil {
		return nil, err
	}
	if opt.TTL == 0 {
		opt.TTL = 30 * time.Second
	}
	if opt.TTL < 10*time.Millisecond || opt.Margin < 0 {
		return nil, errs.Errorf("%w: worker TTL %v / margin %v", ErrInvalid, opt.TTL, opt.Margin)
	}
	if opt.Margin == 0 {
		opt.Margin = opt.TTL
	}
	if opt.MaxWorkers <= 0 || opt.MaxWorkers > opt.Layout.MaxWorkers() {
		opt.MaxWorkers = opt.Layout.MaxWorkers()
	}
	if opt.Owner == "" {
		opt.Owner = coord.NewOwnerID()
	}
	q := db.Dialect().Q()
	// After a promotion (PostgreSQL), wait until TTL + Margin have passed
	// since the promoted server first saw its epoch: a holder whose grant
	// or heartbeats were lost with the old primary has stopped by then.
	for {
		g, err := db.Dialect().WorkerEpochReady(ctx, db.Executor(), (opt.TTL + opt.Margin).Microseconds(), db.Epochs().Seen())
		if err != nil {
			return nil, errs.Errorf("ids: lease worker id: %w", db.Dialect().Classify(err))
		}
		if err := core.ObserveEpoch(db.Epochs(), g.Epoch); err != nil {
			return nil, err
		}
		if g.Ready {
			break
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < g.Left {
			return nil, &GraceError{RetryAfter: g.Left, Epoch: g.Epoch}
		}
		if err := backoff.Sleep(ctx, max(min(g.Left, time.Second), time.Millisecond)); err != nil {
			return nil, err
		}
	}
	var id, lastMs int64
	var released bool
	leasedAt := time.Now()
	// Concurrent first leases race for the same new id (primary key) or
	// deadlock on InnoDB's insert locks: txn.Do retries both with jitter.
	err := txn.Do(ctx, db, txn.Options{MaxAttempts: 30}, func(ctx context.Context, ttx TTx) error {
		tx := db.TxExecutor(ttx)
		err := tx.QueryRow(ctx, q.WorkerFree, opt.Margin.Microseconds()).Scan(&id, &lastMs, &released)
		if err == nil {
			n, err := tx.Exec(ctx, q.WorkerTake, opt.Owner, opt.TTL.Microseconds(), id, opt.Margin.Microseconds())
			if err != nil {
				return err
			}
			if n != 1 {
				return ErrNoWorkerID
			}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var max sql.NullInt64
		if err := tx.QueryRow(ctx, q.WorkerMax).Scan(&max); err != nil {
			return err
		}
		id = 0
		if max.Valid {
			id = max.Int64 + 1
		}
		if id >= int64(opt.MaxWorkers) {
			return errs.Errorf("%w (all %d leased to live nodes)", ErrNoWorkerID, opt.MaxWorkers)
		}
		lastMs, released = 0, true
		_, err = tx.Exec(ctx, q.WorkerInsert, id, opt.Owner, opt.TTL.Microseconds())
		if errors.Is(db.Dialect().Classify(err), sqlcoord.ErrDuplicate) {
			return &dialects.Error{Kind: dialects.ErrSerialization, Err: err} // lost the race for this id: retry
		}
		return err
	})
	if err != nil {
		return nil, errs.Errorf("ids: lease worker id: %w", err)
	}
	floor := lastMs
	if !released {
		// the previous owner died: it may have issued ids for up to a TTL
		// after its last heartbeat recorded last_ms
		floor += opt.TTL.Milliseconds()
	}
	sf, err := NewSnowflake(id, floor, opt.SnowflakeOptions)
	if err != nil {
		db.Executor().Exec(context.Background(), q.WorkerRelease, 0, id, opt.Owner)
		return nil, err
	}
	w := &Worker{Snowflake: sf, db: db, id: id, owner: opt.Owner, opt: opt}
	// One keep-alive (internal/keepalive), validity counted from when the
	// lease transaction began; heartbeats record last_ms so that the next
	// owner of this id stays above every id issued here.
	loop, err := keepalive.Start(context.Background(), leasedAt, keepalive.Options{
		TTL: opt.TTL,
		Renew: func(ctx context.Context) error {
			n, err := db.Executor().Exec(ctx, q.WorkerHeartbeat, opt.TTL.Microseconds(), w.LastMs(), id, opt.Owner)
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrWorkerLost
			}
			return nil
		},
		Lost: func(err error) bool { return errors.Is(err, ErrWorkerLost) },
		Expired: func(last error) error {
			return errs.Errorf("%w: heartbeats failing: %v", ErrWorkerLost, last)
		},
	})
	if err != nil {
		db.Executor().Exec(context.Background(), q.WorkerRelease, 0, id, opt.Owner)
		return nil, errs.Errorf("%w: %v", ErrInvalid, err)
	}
	w.loop = loop
	sf.valid = func() error {
		if loop.Valid() {
			return nil
		}
		// the loop's own verdict (refused heartbeat, heartbeats failing),
		// or a validity that ran out before any timer noticed
		if c := context.Cause(loop.Context()); c != nil && !errors.Is(c, context.Canceled) {
			return c
		}
		return errs.Errorf("%w: lease validity passed", ErrWorkerLost)
	}
	return w, nil
}

// ID is the leased worker id.
func (w *Worker) ID() int64 { return w.id }

// Close stops heartbeats and releases the worker id, recording the last
// issued timestamp so the next owner stays above it.
func (w *Worker) Close(ctx context.Context) error {
	w.loop.Stop()
	last := w.LastMs()
	w.stop(errors.New("ids: worker closed"))
	_, err := w.db.Executor().Exec(ctx, w.db.Dialect().Q().WorkerRelease, last, w.id, w.owner)
	return err
}
