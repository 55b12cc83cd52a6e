package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
)

// LockNamesConfig sizes the one-off lock names benchmark.
type LockNamesConfig struct {
	Names    int           // distinct names, each locked once per run
	Clients  int           // concurrent lockers
	Cleanup  time.Duration // with-cleanup run: CleanupLocks(age=Cleanup) every Cleanup; 0 skips that run
	Progress io.Writer
}

// LockNamesRow is one tenth of a run.
type LockNamesRow struct {
	Dialect   string        `json:"dialect"`
	Run       string        `json:"run"`
	Done      int           `json:"names_done"`
	OpsPerS   float64       `json:"ops_per_s"`
	P99       time.Duration `json:"p99_ns"`
	Rows      int64         `json:"rows"`
	Bytes     int64         `json:"table_and_index_bytes"`
	BytesPerM float64       `json:"bytes_per_million_rows,omitempty"`
}

// LockNames measures what lock names cost when every name is used once
// (one per order, say): TryLock + commit of Names distinct names from
// Clients goroutines, throughput and p99 per tenth of the run, and the
// coord_locks table's rows and size as it goes — once without cleanup
// (growth) and once with CleanupLocks running beside the lockers
// (bounded).
func LockNames(ctx context.Context, db *sqlcoord.DB, cfg LockNamesConfig) ([]LockNamesRow, error) {
	if cfg.Names <= 0 || cfg.Clients <= 0 {
		return nil, fmt.Errorf("bench: lock names: names and clients must be positive")
	}
	c := coord.New(db)
	poolSize(db, cfg.Clients+4)
	var out []LockNamesRow
	runs := []string{"no cleanup"}
	if cfg.Cleanup > 0 {
		runs = append(runs, fmt.Sprintf("CleanupLocks every %v", cfg.Cleanup))
	}
	for ri, run := range runs {
		if _, err := c.CleanupLocks(ctx, 0, 10000); err != nil {
			return out, err
		}
		stop := make(chan struct{})
		var cleaner sync.WaitGroup
		if ri == 1 {
			cleaner.Add(1)
			go func() {
				defer cleaner.Done()
				t := time.NewTicker(cfg.Cleanup)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						c.CleanupLocks(ctx, cfg.Cleanup, 5000)
					}
				}
			}()
		}
		var next atomic.Int64
		tenth := max(cfg.Names/10, 1)
		for part := 0; part*tenth < cfg.Names; part++ {
			end := min((part+1)*tenth, cfg.Names)
			var mu sync.Mutex
			var lat []time.Duration
			var errs atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < cfg.Clients; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, 1024)
					for {
						i := next.Add(1) - 1
						if i >= int64(end) || ctx.Err() != nil {
							break
						}
						t0 := time.Now()
						if err := lockOnce(ctx, db, c, fmt.Sprintf("order:%d:%d", ri, i)); err != nil {
							errs.Add(1)
							continue
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			next.Store(int64(end))
			el := time.Since(start)
			if ctx.Err() != nil {
				close(stop)
				return out, ctx.Err()
			}
			if e := errs.Load(); e > 0 {
				close(stop)
				return out, fmt.Errorf("bench: lock names: %d locks failed", e)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			row := LockNamesRow{Dialect: db.Dialect().Name(), Run: run, Done: end, OpsPerS: float64(len(lat)) / el.Seconds()}
			if len(lat) > 0 {
				row.P99 = lat[len(lat)*99/100]
			}
			row.Rows, row.Bytes = lockTableSize(ctx, db)
			if row.Rows > 0 {
				row.BytesPerM = float64(row.Bytes) / float64(row.Rows) * 1e6
			}
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  %-8s %-26s %10d names %9.0f locks/s  p99 %-9v coord_locks %d rows, %d MB\n",
					row.Dialect, run, end, row.OpsPerS, row.P99.Round(time.Microsecond), row.Rows, row.Bytes>>20)
			}
			out = append(out, row)
		}
		close(stop)
		cleaner.Wait()
	}
	return out, nil
}

func lockOnce(ctx context.Context, db *sqlcoord.DB, c *coord.Client[*sql.Tx], name string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := c.TryLock(ctx, tx, name); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// lockTableSize is coord_locks' row count (estimated where exact counting
// would scan) and on-disk size, table and indexes.
func lockTableSize(ctx context.Context, db *sqlcoord.DB) (int64, int64) {
	var rows, size int64
	if db.Dialect().Family() == "postgres" {
		db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM coord_locks), pg_total_relation_size('coord_locks')`).Scan(&rows, &size)
		return rows, size
	}
	db.ExecContext(ctx, `ANALYZE TABLE coord_locks`)
	db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM coord_locks), DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_locks'`).Scan(&rows, &size)
	return rows, size
}

// LockNamesMarkdown renders the rows as a table.
func LockNamesMarkdown(rs []LockNamesRow) string {
	var b strings.Builder
	b.WriteString("| dialect | run | names done | locks/s (this tenth) | p99 | coord_locks rows | table+index MB | bytes per 1 M rows |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		per := ""
		if r.BytesPerM > 0 {
			per = fmt.Sprintf("%.0f MB", r.BytesPerM/1e6)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %v | %d | %.1f | %s |\n", r.Dialect, r.Run, r.Done, r.OpsPerS, r.P99.Round(time.Microsecond), r.Rows, float64(r.Bytes)/(1<<20), per)
	}
	return b.String()
}
