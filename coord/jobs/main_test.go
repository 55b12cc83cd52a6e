package jobs_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func TestMain(m *testing.M) {
	h := map[string]dbtest.HelperFunc{}
	for _, name := range []string{"effects", "slow", "shard", "fenced", "retry", "spread", "queue"} {
		h[name] = func(ctx context.Context, db *sqlcoord.DB) error { return runScheduler(ctx, db, name) }
	}
	dbtest.MainWithHelpers(m, h)
}

func envDur(k string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(k))
	return d
}

// runScheduler runs a scheduler instance for job name in its own process.
func runScheduler(ctx context.Context, db *sqlcoord.DB, name string) error {
	offset := envDur("OFFSET")
	sch := jobs.NewScheduler(db, jobs.Options{
		Owner:  os.Getenv("OWNER"),
		Tick:   20 * time.Millisecond,
		Clock:  func() time.Time { return time.Now().Add(offset) },
		Logger: slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err := sch.Register(jobForHelper(db, name)); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, envDur("RUN_FOR"))
	defer cancel()
	sch.Run(rctx)
	fmt.Println("EXIT")
	return nil
}

func jobForHelper(db *sqlcoord.DB, name string) jobs.Job {
	ph := db.Dialect().Placeholder
	owner := os.Getenv("OWNER")
	j := jobs.Job{Name: name, Schedule: os.Getenv("SPEC"), Grace: envDur("GRACE")}
	switch name {
	case "effects": // one raw effect row per run: the count shows double runs
		j.Run = func(ctx context.Context, in jobs.Info) error {
			_, err := db.ExecContext(ctx, `INSERT INTO effects (fire_time, owner, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, in.FireTime, owner, in.Attempt)
			return err
		}
	case "slow": // announces itself, then works for SLEEP
		j.Run = func(ctx context.Context, in jobs.Info) error {
			fmt.Printf("RUNNING %d %d\n", in.FireTime.UnixMicro(), in.Attempt)
			select {
			case <-time.After(envDur("SLEEP")):
			case <-ctx.Done():
				fmt.Println("CANCELLED", context.Cause(ctx))
				return ctx.Err()
			}
			_, err := db.ExecContext(context.Background(), `INSERT INTO effects (fire_time, owner, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, in.FireTime, owner, in.Attempt)
			return err
		}
	case "fenced":
		j.Run = fencedJob(db)
	case "queue": // Overlap Queue, each run 1.5 s (slots queue up); start and end by the database clock
		j.Overlap = jobs.Queue
		now := map[string]string{"postgres": "clock_timestamp()", "mysql": "UTC_TIMESTAMP(6)", "mariadb": "UTC_TIMESTAMP(6)"}[db.Dialect().Name()]
		j.Run = func(ctx context.Context, in jobs.Info) error {
			if _, err := db.ExecContext(ctx, `INSERT INTO spans (fire_time, owner, started_at) VALUES (`+ph(1)+`, `+ph(2)+`, `+now+`)`, in.FireTime, owner); err != nil {
				return err
			}
			time.Sleep(1500 * time.Millisecond)
			_, err := db.ExecContext(ctx, `UPDATE spans SET ended_at = `+now+` WHERE fire_time = `+ph(1), in.FireTime)
			return err
		}
	case "spread": // 6 shards of 300 ms each, one at a time per process
		j.Shards = 6
		j.Run = func(ctx context.Context, in jobs.Info) error {
			time.Sleep(300 * time.Millisecond)
			_, err := db.ExecContext(ctx, `INSERT INTO spread (fire_time, shard, owner) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, in.FireTime, in.Shard, owner)
			return err
		}
	case "retry": // logs every attempt (autocommit), then fails: dead after 4
		j.Retry = jobs.Retry{MaxAttempts: 4, BaseBackoff: 400 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}
		j.Run = func(ctx context.Context, in jobs.Info) error {
			_, err := db.ExecContext(ctx, `INSERT INTO tries (fire_time, failures, attempt, pid) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`)`,
				in.FireTime, in.Failures, in.Attempt, os.Getpid())
			if err != nil {
				return err
			}
			return fmt.Errorf("attempt after %d failures fails too", in.Failures)
		}
	case "shard":
		j.Shards = 2
		j.Run = shardJob(db, os.Getenv("MODE"), atoi(os.Getenv("CRASH_AFTER")))
	}
	return j
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// shardJob delivers the shard's items. Dedup per item is either the
// application's own unique key (MODE=unique: delivered.item_id) or an
// idempotency key (MODE=keys). Every delivery actually made appends a row
// to sends (no unique key): doubles would show there.
func shardJob(db *sqlcoord.DB, mode string, crashAfter int) func(context.Context, jobs.Info) error {
	ph := db.Dialect().Placeholder
	keys := txn.NewKeys(db, txn.KeysOptions{})
	var done atomic.Int64
	return func(ctx context.Context, in jobs.Info) error {
		rows, err := db.QueryContext(ctx, `SELECT id FROM items WHERE MOD(id, `+ph(1)+`) = `+ph(2)+` ORDER BY id`, in.ShardTotal, in.Shard)
		if err != nil {
			return err
		}
		var items []int
		for rows.Next() {
			var id int
			rows.Scan(&id)
			items = append(items, id)
		}
		rows.Close()
		for _, id := range items {
			err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				if mode == "keys" {
					c, err := keys.Begin(ctx, tx, "shard-job", strconv.Itoa(id), nil)
					if err != nil || c.Replay {
						return err
					}
					if err := keys.Complete(ctx, tx, "shard-job", strconv.Itoa(id), nil); err != nil {
						return err
					}
				} else {
					res, err := tx.ExecContext(ctx, insertIgnore(db, `delivered (item_id) VALUES (`+ph(1)+`)`), id)
					if err != nil {
						return err
					}
					if n, _ := res.RowsAffected(); n == 0 {
						return nil // delivered by an earlier attempt
					}
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO sends (item_id, shard, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, id, in.Shard, in.Attempt)
				return err
			})
			if err != nil {
				return err
			}
			if n := done.Add(1); crashAfter > 0 && int(n) == crashAfter {
				fmt.Println("CRASHING")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Hour)
			}
		}
		return nil
	}
}

// insertIgnore is "insert unless the key exists" in each dialect's words.
func insertIgnore(db *sqlcoord.DB, rest string) string {
	return map[string]string{
		"postgres": "INSERT INTO " + rest + " ON CONFLICT DO NOTHING",
		"mysql":    "INSERT IGNORE INTO " + rest,
		"mariadb":  "INSERT IGNORE INTO " + rest,
	}[db.Dialect().Name()]
}
