package sqlcoord_test

import (
	"context"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Forks lists every epoch the database has had, in order: a new epoch of
// the same history (what a restart, a restored snapshot or `epoch
// advance` starts) is added, not written over the history's row — an
// operator asking what happened to the database sees all of it.
func TestForksKeepEveryEpoch(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		if _, err := sqlcoord.CurrentEpoch(ctx, env.DB); err != nil {
			t.Fatal(err)
		}
		before, err := sqlcoord.Forks(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		var bases []int64
		for range 2 {
			b, err := sqlcoord.AdvanceEpoch(ctx, env.DB)
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, b)
		}
		after, err := sqlcoord.Forks(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before)+2 {
			t.Fatalf("%d epochs listed after two advances, %d before: %+v", len(after), len(before), after)
		}
		for i := 1; i < len(after); i++ {
			if after[i].Base <= after[i-1].Base {
				t.Fatalf("not in order: %+v", after)
			}
		}
		last := after[len(after)-1]
		if last.Base != bases[1] || !last.Current || after[len(after)-2].Current {
			t.Fatalf("the newest epoch is not the one current: %+v", after)
		}
		if len(before) > 0 && after[0].Base != before[0].Base {
			t.Fatalf("the first epoch was lost: %+v, before %+v", after, before)
		}
	})
}
