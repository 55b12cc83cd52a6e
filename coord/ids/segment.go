// Package ids hands out unique ids with the database as the authority:
//
//   - Segments (Leaf-style): ranges of a per-tag counter, each fetched by
//     one short transaction that advances coord_id_segments.max_id, served
//     from two in-memory buffers. Two processes can never hold overlapping
//     ranges, because the row update is serialised by the database.
//   - Snowflake: 64-bit time-ordered ids whose worker id is leased from
//     coord_id_workers, so two live nodes never share one.
//   - UUIDv7 (RFC 9562), monotonic within a process.
//
// Ids never repeat; they are not gapless. A segment's unused ids are
// skipped when a process stops, and a restarted snowflake node skips ahead
// of the last timestamp its worker id recorded.
package ids

import (
	"context"
	"database/sql"
	"errors"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

var (
	// ErrUnknownTag: the tag has no row and AutoCreate is off.
	ErrUnknownTag = errors.New("ids: unknown segment tag")
	// ErrNotReady: the current segment ran out and the next one could not
	// be fetched within SegmentOptions.MaxWait.
	ErrNotReady = errors.New("ids: no segment available")
	// ErrInvalid: invalid tag, step or layout.
	ErrInvalid = errors.New("ids: invalid configuration")
)

// SegmentOptions tune a Segments allocator.
type SegmentOptions struct {
	// Step is the first range size; default 1000.
	Step int
	// MinStep and MaxStep bound the dynamic step; defaults Step and
	// 100×Step. Set MaxStep = MinStep = Step for a fixed step.
	MinStep, MaxStep int
	// Target is how long one segment should last. A segment used up in
	// under Target/2 doubles the step; one lasting over 2×Target halves it.
	// Default 15 minutes.
	Target time.Duration
	// Prefetch is the used fraction of the current segment at which the
	// next one is fetched in the background; default 0.1.
	Prefetch float64
	// MaxWait bounds how long Next waits for a segment being fetched;
	// default 2s.
	MaxWait time.Duration
	// AutoCreate creates unknown tags (starting at 0) instead of failing
	// with ErrUnknownTag.
	AutoCreate bool
}

type segment struct {
	next  atomic.Int64 // next id to hand out
	max   int64        // last id of the range (inclusive)
	start int64
	warn  int64 // next >= warn: prefetch
}

// Segments allocates ids for one tag. Next is safe for many goroutines; its
// hot path is one atomic add.
type Segments struct {
	db  sqlcoord.Base
	tag string
	opt SegmentOptions

	cur atomic.Pointer[segment]

	mu        sync.Mutex
	nextSeg   *segment
	loading   chan struct{} // non-nil while a fetch runs; closed when done
	loadErr   error
	step      int
	lastFetch time.Time
	fetches   atomic.Int64
}

// NewSegments returns an allocator for tag. The first segment is fetched
// lazily by the first Next.
func NewSegments(db sqlcoord.Base, tag string, opt SegmentOptions) (*Segments, error) {
	if err := valid.Text("segment tag", tag, 128); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if opt.Step == 0 {
		opt.Step = 1000
	}
	if opt.MinStep == 0 {
		opt.MinStep = opt.Step
	}
	if opt.MaxStep == 0 {
		opt.MaxStep = 100 * opt.Step
	}
	if opt.Step < 1 || opt.MinStep < 1 || opt.MaxStep < opt.MinStep || opt.Step < opt.MinStep || opt.Step > opt.MaxStep || opt.MaxStep > 1<<30 {
		return nil, errs.Errorf("%w: steps must satisfy 1 <= MinStep <= Step <= MaxStep <= 2^30 (got %d, %d, %d)", ErrInvalid, opt.MinStep, opt.Step, opt.MaxStep)
	}
	if opt.Target < 0 || opt.MaxWait < 0 || opt.Prefetch < 0 {
		return nil, errs.Errorf("%w: negative Target %v, MaxWait %v or Prefetch %v", ErrInvalid, opt.Target, opt.MaxWait, opt.Prefetch)
	}
	if opt.Target == 0 {
		opt.Target = 15 * time.Minute
	}
	if opt.Prefetch <= 0 || opt.Prefetch >= 1 {
		opt.Prefetch = 0.1
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = 2 * time.Second
	}
	s := &Segments{db: db, tag: tag, opt: opt, step: opt.Step}
	empty := &segment{max: -1}
	empty.next.Store(0)
	empty.warn = 1 << 62
	s.cur.Store(empty)
	return s, nil
}

// Fetches is the number of segments fetched so far (database round trips
// of this allocator, one transaction each).
func (s *Segments) Fetches() int64 { return s.fetches.Load() }

// Step is the current step.
func (s *Segments) Step() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// Next returns a new id. It blocks (at most MaxWait, and never past ctx)
// only when both buffers are empty.
func (s *Segments) Next(ctx context.Context) (int64, error) {
	for {
		seg := s.cur.Load()
		v := seg.next.Add(1) - 1
		if v <= seg.max {
			if v == seg.warn {
				s.prefetch()
			}
			return v, nil
		}
		if err := s.advance(ctx, seg); err != nil {
			return 0, err
		}
	}
}

// prefetch starts a background fetch of the next segment if none is ready
// or running.
func (s *Segments) prefetch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nextSeg == nil && s.loading == nil {
		s.startLoad()
	}
}

// startLoad runs with s.mu held.
func (s *Segments) startLoad() {
	done := make(chan struct{})
	s.loading = done
	s.loadErr = nil
	step := s.step
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		seg, err := s.fetch(ctx, step)
		s.mu.Lock()
		if err == nil {
			s.nextSeg = seg
			s.adjustStep(step)
		}
		s.loadErr = err
		s.loading = nil
		s.mu.Unlock()
		close(done)
	}()
}

// adjustStep grows or shrinks the step from how fast segments are used.
func (s *Segments) adjustStep(used int) {
	now := time.Now()
	if !s.lastFetch.IsZero() {
		el := now.Sub(s.lastFetch)
		switch {
		case el < s.opt.Target/2 && s.step*2 <= s.opt.MaxStep:
			s.step *= 2
		case el > 2*s.opt.Target && s.step/2 >= s.opt.MinStep:
			s.step /= 2
		}
	}
	s.lastFetch = now
}

// advance replaces the exhausted segment old with the next one, waiting
// for a fetch if needed.
func (s *Segments) advance(ctx context.Context, old *segment) error {
	deadline := time.NewTimer(s.opt.MaxWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.cur.Load() != old { // another goroutine switched already
			s.mu.Unlock()
			return nil
		}
		if s.nextSeg != nil {
			s.cur.Store(s.nextSeg)
			s.nextSeg = nil
			s.mu.Unlock()
			return nil
		}
		if s.loading == nil {
			if errors.Is(s.loadErr, ErrUnknownTag) {
				err := s.loadErr
				s.loadErr = nil
				s.mu.Unlock()
				return err
			}
			s.startLoad()
		}
		wait := s.loading
		s.mu.Unlock()
		select {
		case <-wait:
			s.mu.Lock()
			err := s.loadErr
			ready := s.nextSeg != nil
			s.mu.Unlock()
			if !ready && err != nil {
				return errs.Errorf("%w for tag %q: %w", ErrNotReady, s.tag, err)
			}
		case <-deadline.C:
			return errs.Errorf("%w for tag %q within %v", ErrNotReady, s.tag, s.opt.MaxWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetch advances max_id by step in one transaction and returns the range.
// fetchRetries bounds how often a fetch rolled back by a deadlock or a
// Galera certification conflict is run again, fetchBackoff spaces them.
const fetchRetries = 20

var fetchBackoff = backoff.Policy{Base: 2 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: backoff.Full}

func (s *Segments) fetch(ctx context.Context, step int) (*segment, error) {
	d := s.db.Dialect()
	var max int64
	for attempt := 0; ; attempt++ {
		// Only the COMMIT's own error can leave the outcome unknown: one
		// before it (no connection, a statement that failed) rolled the
		// fetch back, or never began it.
		committing := false
		err := func() error {
			tx, err := core.Owned(ctx, s.db, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			got, err := d.SegmentAdvance(ctx, tx, s.tag, step, s.db.Epochs().Seen())
			if err != nil {
				return err
			}
			committing = true
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			committing = false
			max = got.Value
			return core.ObserveEpoch(s.db.Epochs(), got.Epoch)
		}()
		if errors.Is(err, sql.ErrNoRows) && attempt == 0 {
			if !s.opt.AutoCreate {
				return nil, errs.Errorf("%w %q (create it with CreateTag or AutoCreate)", ErrUnknownTag, s.tag)
			}
			if err := CreateTag(ctx, s.db, s.tag, 0); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			cerr := d.ClassifyCommit(err) // outcome unknown, or unreachable: nothing sent
			if !committing && !errors.Is(cerr, sqlcoord.ErrUnreachable) {
				cerr = d.Classify(err) // rolled back: a lost connection is ErrConnLost
			}
			// A deadlock (or, on Galera, a certification conflict with a
			// fetch on another node) rolled the whole fetch back: run it
			// again. An unknown commit outcome is not retried: the range
			// may be taken, and a new fetch takes the next one anyway.
			if sqlcoord.Retryable(cerr) && attempt < fetchRetries {
				if err := backoff.Sleep(ctx, fetchBackoff.Delay(attempt)); err != nil {
					return nil, err
				}
				continue
			}
			return nil, errs.Errorf("ids: fetch segment %q: %w", s.tag, cerr)
		}
		break
	}
	s.fetches.Add(1)
	seg := &segment{max: max, start: max - int64(step) + 1}
	seg.next.Store(seg.start)
	seg.warn = seg.start + int64(float64(step)*s.opt.Prefetch)
	return seg, nil
}

// CreateTag creates a segment tag whose first id will be start+1, if it
// does not exist. Existing tags are left alone.
func CreateTag(ctx context.Context, db sqlcoord.Base, tag string, start int64) error {
	if err := valid.Text("segment tag", tag, 128); err != nil {
		return errs.Errorf("%w: %w", ErrInvalid, err)
	}
	if start < 0 {
		return errs.Errorf("%w: negative start %d", ErrInvalid, start)
	}
	if _, err := db.Executor().Exec(ctx, db.Dialect().Q().SegmentCreate, tag, start, 1); err != nil {
		return errs.Errorf("ids: create tag %q: %w", tag, db.Dialect().Classify(err))
	}
	return nil
}
