package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/bench"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func benchTables(t *testing.T, env *dbtest.Env) int {
	var n int
	q := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'coord_bench_ins%'`
	if env.Family == "mysql" {
		q = `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'coord_bench_ins%'`
	}
	if err := env.DB.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInsertsSmall(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		rs, err := bench.Inserts(ctx, env.DB, bench.InsertConfig{Rows: 3000, Batch: 200, Clients: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 7 || rs[0].Strategy != "auto-increment" || rs[0].TimeRatio != 1 {
			t.Fatalf("results %+v", rs)
		}
		for _, r := range rs {
			if r.DataBytes <= 0 || r.IndexBytes <= 0 || r.SecondaryByte <= 0 || r.RowsPerS <= 0 {
				t.Fatalf("%s: missing figures %+v", r.Strategy, r)
			}
		}
		if n := benchTables(t, env); n != 0 {
			t.Fatalf("%d benchmark tables left behind", n)
		}
		// --keep keeps them
		if _, err := bench.Inserts(ctx, env.DB, bench.InsertConfig{Rows: 500, Batch: 100, Clients: 1, Keep: true, Only: []string{"snowflake"}}); err != nil {
			t.Fatal(err)
		}
		if n := benchTables(t, env); n != 1 {
			t.Fatalf("keep: %d tables", n)
		}
		// an interrupted run cleans up
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if _, err := bench.Inserts(cctx, env.DB, bench.InsertConfig{Rows: 5_000_000, Batch: 500, Clients: 2, Only: []string{"uuidv4 char(36)"}}); err == nil {
			t.Fatal("interrupted run reported success")
		}
		if n := benchTables(t, env); n != 1 {
			t.Fatalf("interrupted run left %d tables (1 kept on purpose)", n)
		}
		// an unknown strategy is refused before anything is loaded: with a
		// 5M-row warm-up first, the context would end before the refusal
		uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
		defer ucancel()
		_, err = bench.Inserts(uctx, env.DB, bench.InsertConfig{Rows: 5_000_000, Batch: 500, Clients: 2, Only: []string{"uuidv7"}})
		if err == nil || !strings.Contains(err.Error(), `unknown strategy "uuidv7"`) || !strings.Contains(err.Error(), "uuidv7 binary") {
			t.Fatalf("unknown strategy: %v", err)
		}
		if n := benchTables(t, env); n != 1 {
			t.Fatalf("refused run left %d tables (1 kept on purpose)", n)
		}
		// report and chart
		dir := t.TempDir()
		png := filepath.Join(dir, "c.png")
		if err := bench.InsertsChart(rs, png); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
			t.Fatalf("chart: %v", err)
		}
		if md := bench.InsertsMarkdown(rs); len(md) < 200 {
			t.Fatalf("markdown %q", md)
		}
	})
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	r := bench.Measure(context.Background(), 4, 100*time.Millisecond, func(ctx context.Context, w int) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	// no bound on Ops: a loaded machine decides how many fit in 100 ms
	if r.Ops < 1 || r.P50 < time.Millisecond || r.P99 < r.P50 || r.OpsPerS <= 0 {
		t.Fatalf("%+v", r)
	}
}

func TestMeasureRate(t *testing.T) {
	t.Parallel()
	t.Run("keeps to the offer", func(t *testing.T) {
		t.Parallel()
		r := bench.MeasureRate(context.Background(), 4, 300*time.Millisecond, 100, func(ctx context.Context, w int) error {
			return nil
		})
		// 100/s for 0.3 s offers 30; a loaded machine may start the last late
		if r.Ops < 20 || r.Ops > 31 {
			t.Fatalf("%d operations offered at 100/s in 300 ms: %+v", r.Ops, r)
		}
	})
	t.Run("latency counts from when an operation was due", func(t *testing.T) {
		t.Parallel()
		// one client, 10 ms per operation, offered one per millisecond:
		// the queue grows, and so does the latency, beyond the 10 ms each takes
		r := bench.MeasureRate(context.Background(), 1, 200*time.Millisecond, 1000, func(ctx context.Context, w int) error {
			time.Sleep(10 * time.Millisecond)
			return nil
		})
		if r.Ops > 21 || r.P99 < 50*time.Millisecond {
			t.Fatalf("a client that cannot keep up: %+v", r)
		}
	})
}
