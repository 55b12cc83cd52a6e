package jobs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
)

func slots(t *testing.T, expr, zone string, from time.Time, n int) []string {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Skipf("no tzdata for %s: %v", zone, err)
	}
	s, err := jobs.ParseSchedule(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := from
	for i := 0; i < n; i++ {
		cur = s.Next(cur)
		out = append(out, cur.In(loc).Format("01-02 15:04 MST"))
	}
	return out
}

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("slot %d: got %q\nwant %q", i, got, want)
		}
	}
}

func TestScheduleDST(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	// spring forward: 02:30 does not exist on 29 March; it fires once, at 03:00 CEST
	eq(t, slots(t, "30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 27, 12, 0, 0, 0, berlin), 3),
		[]string{"03-28 02:30 CET", "03-29 03:00 CEST", "03-30 02:30 CEST"})
	// fall back: 02:30 occurs twice on 25 October; it fires once, at the first
	eq(t, slots(t, "30 2 * * *", "Europe/Berlin", time.Date(2026, 10, 24, 12, 0, 0, 0, berlin), 3),
		[]string{"10-25 02:30 CEST", "10-26 02:30 CET", "10-27 02:30 CET"})
	// several wanted times in the gap collapse into one slot
	eq(t, slots(t, "0,30 1-3 * * *", "Europe/Berlin", time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), 5),
		[]string{"03-29 01:00 CET", "03-29 01:30 CET", "03-29 03:00 CEST", "03-29 03:30 CEST", "03-30 01:00 CEST"})
	eq(t, slots(t, "0,30 1-3 * * *", "Europe/Berlin", time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), 7),
		[]string{"10-25 01:00 CEST", "10-25 01:30 CEST", "10-25 02:00 CEST", "10-25 02:30 CEST", "10-25 03:00 CET", "10-25 03:30 CET", "10-26 01:00 CET"})
	ny, _ := time.LoadLocation("America/New_York")
	eq(t, slots(t, "15 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), 2),
		[]string{"03-08 03:00 EDT", "03-09 02:15 EDT"})
	// a schedule that never touches the gap is unaffected
	eq(t, slots(t, "0 12 * * *", "Europe/Berlin", time.Date(2026, 3, 28, 13, 0, 0, 0, berlin), 2),
		[]string{"03-29 12:00 CEST", "03-30 12:00 CEST"})
}

func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"", "61 * * * *", "@every 1s", "nonsense"} {
		if _, err := jobs.ParseSchedule(e, nil); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("%q: %v", e, err)
		}
	}
	s, err := jobs.ParseSchedule("*/10 * * * * *", nil) // seconds field
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC)
	if got := s.Between(base, base.Add(time.Minute), 0); len(got) != 6 {
		t.Fatalf("%d slots in a minute", len(got))
	}
	if got := s.Between(base, base.Add(time.Hour), 4); len(got) != 4 || !got[3].Equal(base.Add(time.Hour).Truncate(10*time.Second)) {
		t.Fatalf("latest 4: %v", got)
	}
}
