package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMergeAddsSlices(t *testing.T) {
	a := summary(2, []time.Duration{1, 2, 3}, 1, time.Second)
	a.Statements, a.WALBytes = 3, 100
	b := summary(2, []time.Duration{4, 5, 6, 7, 8}, 0, time.Second)
	b.Statements, b.WALBytes = 5, 200
	m := merge([]Result{a, b})
	if m.Ops != 8 || m.Errors != 1 || m.Elapsed != 2*time.Second || m.OpsPerS != 4 || m.Clients != 2 {
		t.Fatalf("merged %+v", m)
	}
	if m.P50 != 5 || m.Statements != (3*3+5*5)/8.0 || m.WALBytes != (3*100+5*200)/8.0 {
		t.Fatalf("merged percentiles or counters: %+v", m)
	}
}

func TestInterleavedTakesTurns(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		s := &suite{db: env.DB, cfg: Config{Duration: 200 * time.Millisecond, Slices: 4}, group: "t"}
		var mu sync.Mutex
		var turns []string
		op := func(name string) Op {
			return func(ctx context.Context, w int) error {
				mu.Lock()
				if len(turns) == 0 || turns[len(turns)-1] != name {
					turns = append(turns, name)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				return nil
			}
		}
		var cases caseList
		cases.add("a", "", op("a"))
		cases.add("b", "a", op("b"))
		s.interleaved(ctx, 2, cases)
		// A B, then B A (one turn each side of the reversal), A B, B A
		if got, want := turns, []string{"a", "b", "a", "b", "a"}; !slices.Equal(got, want) {
			t.Fatalf("turns %v, want %v (slices a b | b a | a b | b a)", got, want)
		}
		if len(s.out) != 2 || s.out[0].Case != "a" || s.out[1].Case != "b" || s.out[1].Ratio <= 0 || s.out[0].Ops < 4 {
			t.Fatalf("results %+v", s.out)
		}
		// each case ran for about Duration in all, not Duration per slice
		if e := s.out[0].Elapsed; e < 150*time.Millisecond || e > 2*time.Second {
			t.Fatalf("case a ran %v in all, want about 200ms", e)
		}
	})
}

// TestPoolSizeKeepsConnections: after a case with fewer clients, a case
// with more keeps its connections between operations (database/sql
// lowers the idle limit with SetMaxOpenConns and never raises it).
func TestPoolSizeKeepsConnections(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		poolSize(db, 2)
		poolSize(db, 16)
		burst := func() {
			var wg sync.WaitGroup
			for range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 20 {
						var one int
						if err := db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		}
		burst()
		before := db.Stats().MaxIdleClosed
		burst()
		if closed := db.Stats().MaxIdleClosed - before; closed != 0 {
			t.Fatalf("%d connections closed for the idle limit between operations of 12 clients", closed)
		}
	})
}
