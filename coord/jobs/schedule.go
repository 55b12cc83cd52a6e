package jobs

import (
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// parser accepts standard 5-field cron, an optional leading seconds field,
// and descriptors (@hourly, @daily, …).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule computes planned fire times from a cron expression in a time
// zone. Fire times are instants; every instance computes the same ones,
// whatever its clock says, because they come from the expression.
//
// Daylight-saving rule (a slot per wall-clock time, never two, never none):
//   - spring forward: wall-clock times that do not exist that day fire once,
//     at the transition instant (e.g. 02:30 Europe/Berlin on the last
//     Sunday of March fires at 03:00 CEST);
//   - fall back: a wall-clock time that occurs twice fires only at its
//     first occurrence (02:30 CEST, not again at 02:30 CET).
type Schedule struct {
	expr string
	loc  *time.Location
	spec *cron.SpecSchedule
}

// ParseSchedule parses expr (robfig/cron syntax; "@every" is refused
// because it is relative to when a process started) for loc (nil: UTC).
func ParseSchedule(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, errs.Errorf("%w: cron %q: %v", ErrInvalid, expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, errs.Errorf("%w: cron %q: @every schedules depend on process start time; use a cron expression", ErrInvalid, expr)
	}
	spec.Location = loc
	return &Schedule{expr: expr, loc: loc, spec: spec}, nil
}

func (s *Schedule) String() string { return s.expr + " (" + s.loc.String() + ")" }

// Next returns the first fire time strictly after t (zero if none within
// five years).
func (s *Schedule) Next(t time.Time) time.Time {
	after := t.In(s.loc)
	for {
		cand := s.spec.Next(after)
		if g := s.gapSlot(after, cand); !g.IsZero() {
			return g.UTC()
		}
		if cand.IsZero() {
			return cand
		}
		if s.repeated(cand) {
			after = cand
			continue
		}
		return cand.UTC()
	}
}

// gapSlot returns the transition instant of a spring-forward gap in
// (after, cand) whose skipped wall-clock times the expression wants.
func (s *Schedule) gapSlot(after, cand time.Time) time.Time {
	t := after
	for i := 0; i < 32; i++ {
		_, end := t.ZoneBounds()
		if end.IsZero() || (!cand.IsZero() && !end.Before(cand)) || end.Sub(after) > 5*365*24*time.Hour {
			return time.Time{}
		}
		_, offBefore := end.Add(-time.Second).Zone()
		_, offAfter := end.Zone()
		if gap := time.Duration(offAfter-offBefore) * time.Second; gap > 0 {
			// evaluate the expression on the wall clock as if the old offset
			// had continued through the gap
			fixed := *s.spec
			fixed.Location = time.FixedZone("pre-transition", offBefore)
			w := fixed.Next(end.Add(-time.Second))
			if !w.IsZero() && w.Before(end.Add(gap)) && end.After(after) {
				return end
			}
		}
		t = end
	}
	return time.Time{}
}

// repeated reports whether t's wall-clock time already occurred earlier
// (the second pass through a fall-back hour).
func (s *Schedule) repeated(t time.Time) bool {
	for _, shift := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		p := t.Add(-shift).In(s.loc)
		if sameWall(p, t) {
			return true
		}
	}
	return false
}

func sameWall(a, b time.Time) bool {
	y1, m1, d1 := a.Date()
	y2, m2, d2 := b.Date()
	return y1 == y2 && m1 == m2 && d1 == d2 && a.Hour() == b.Hour() && a.Minute() == b.Minute() && a.Second() == b.Second()
}

// Between returns the fire times in (from, to], at most max of them (the
// latest ones when there are more).
func (s *Schedule) Between(from, to time.Time, max int) []time.Time {
	var out []time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
		if max > 0 && len(out) > max {
			out = out[1:]
		}
	}
	return out
}
