package sqlutil

import (
	"math"
	"testing"
	"time"
)

func TestPause(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		name string
		pace Pace
		took time.Duration
		rows int64
		want time.Duration
	}{
		{"no pace: no pause", Pace{}, 10 * ms, 1000, 0},
		{"duty 1: no pause", Pace{Duty: 1}, 10 * ms, 1000, 0},
		{"duty 0.25: three times the batch", Pace{Duty: 0.25}, 10 * ms, 1000, 30 * ms},
		{"rate: the rest of rows/rate", Pace{Rate: 10000}, 10 * ms, 1000, 90 * ms},
		{"rate already met: no pause", Pace{Rate: 10000}, 200 * ms, 1000, 0},
		{"both: the longer (rate)", Pace{Duty: 0.5, Rate: 10000}, 10 * ms, 1000, 90 * ms},
		{"both: the longer (duty)", Pace{Duty: 0.01, Rate: 10000}, 10 * ms, 1000, 990 * ms},
		{"a tiny rate: the longest Duration, not an overflow", Pace{Rate: 1e-300}, ms, 1000, math.MaxInt64},
		{"a tiny duty: the longest Duration, not an overflow", Pace{Duty: 1e-300}, ms, 1000, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := pause(c.pace, c.took, c.rows)
			if d := got - c.want; d > time.Microsecond || d < -time.Microsecond {
				t.Fatalf("pause(%+v, %v, %d) = %v, want %v", c.pace, c.took, c.rows, got, c.want)
			}
		})
	}
}
