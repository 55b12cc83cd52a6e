package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "jobs", title: "a scheduled job on two instances, one clock 300 ms behind; a sharded batch with a crash", run: demoJobs})
}

// exactSecondSpec is a cron expression (with seconds) that fires once, at t.
func exactSecondSpec(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d %d %d *", t.Second(), t.Minute(), t.Hour(), t.Day(), int(t.Month()))
}

func demoJobs(ctx context.Context, e *demoEnv) error {
	db := e.DB
	ph := db.Dialect().Placeholder
	exec := func(q string, args ...any) error { _, err := db.ExecContext(ctx, q, args...); return err }
	for _, q := range []string{`DROP TABLE IF EXISTS demo_messages`, `DROP TABLE IF EXISTS demo_job_lock`} {
		exec(q)
	}
	if err := exec(`CREATE TABLE demo_messages (run VARCHAR(20) NOT NULL, user_id INT NOT NULL, instance VARCHAR(10) NOT NULL)`); err != nil {
		return err
	}
	if err := exec(`CREATE TABLE demo_job_lock (lock_key VARCHAR(80) PRIMARY KEY)`); err != nil {
		return err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_messages`)
	defer db.ExecContext(context.Background(), `DROP TABLE demo_job_lock`)
	// the job: send a message to each of 100 users
	send := func(run, inst string) error {
		var sb strings.Builder
		sb.WriteString("INSERT INTO demo_messages (run, user_id, instance) VALUES ")
		for u := 1; u <= 100; u++ {
			if u > 1 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "('%s', %d, '%s')", run, u, inst)
		}
		_, err := db.ExecContext(ctx, sb.String())
		return err
	}
	messages := func(run string) int {
		var n int
		db.QueryRowContext(ctx, `SELECT count(*) FROM demo_messages WHERE run = `+ph(1), run).Scan(&n)
		return n
	}
	// two instances: A on time, B 300 ms behind, both firing at slot F by
	// their own clocks
	twoInstances := func(run string, body func(inst string, fire time.Time) error) error {
		fire := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for inst, skew := range map[string]time.Duration{"A": 0, "B": -300 * time.Millisecond} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(fire.Add(-skew))) // B's clock reads F 300 ms late
				if err := body(inst, fire); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	e.printf("job: send a message to each of 100 users, scheduled on instances A and B (B's clock 300 ms behind)\n")
	if err := twoInstances("nolock", func(inst string, _ time.Time) error { return send("nolock", inst) }); err != nil {
		return err
	}
	e.printf("1. no lock:                                   %d messages\n", messages("nolock"))
	err := twoInstances("fixedkey", func(inst string, _ time.Time) error {
		if _, err := db.ExecContext(ctx, `INSERT INTO demo_job_lock VALUES ('send-messages')`); err != nil {
			return nil // lock held: skip
		}
		defer db.ExecContext(ctx, `DELETE FROM demo_job_lock WHERE lock_key = 'send-messages'`)
		return send("fixedkey", inst)
	})
	if err != nil {
		return err
	}
	e.printf("2. fixed lock key, deleted after the run:     %d messages (B arrives after A released it)\n", messages("fixedkey"))
	err = twoInstances("slotkey", func(inst string, fire time.Time) error {
		if _, err := db.ExecContext(ctx, `INSERT INTO demo_job_lock VALUES (`+ph(1)+`)`, "send-messages@"+fire.Format(time.RFC3339)); err != nil {
			return nil
		}
		return send("slotkey", inst)
	})
	if err != nil {
		return err
	}
	e.printf("3. per-slot lock key, kept:                   %d messages\n", messages("slotkey"))

	// 4. sqlcoord: two schedulers claim the slot in coord_job_runs
	fire := time.Now().Add(2 * time.Second).Truncate(time.Second)
	sctx, cancel := context.WithDeadline(ctx, fire.Add(1500*time.Millisecond))
	defer cancel()
	var wg sync.WaitGroup
	for inst, skew := range map[string]time.Duration{"A": 0, "B": -300 * time.Millisecond} {
		s := jobs.NewScheduler(db, jobs.Options{Owner: "demo-" + inst, Tick: 20 * time.Millisecond,
			Clock: func() time.Time { return time.Now().Add(skew) }})
		if err := s.Register(jobs.Job{Name: "send-messages", Schedule: exactSecondSpec(fire),
			Run: func(ctx context.Context, in jobs.Info) error { return send("sqlcoord", inst) }}); err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(sctx) }()
	}
	wg.Wait()
	var winner string
	db.QueryRowContext(ctx, `SELECT MIN(instance) FROM demo_messages WHERE run = 'sqlcoord'`).Scan(&winner)
	e.printf("4. sqlcoord jobs (unique claim per slot):     %d messages (run by instance %s)\n", messages("sqlcoord"), winner)

	return demoShards(ctx, e)
}

// demoShards: 10,000 items over 2 shards; instance A dies after 2,000
// deliveries, B takes the dead shard runs over and finishes.
func demoShards(ctx context.Context, e *demoEnv) error {
	db := e.DB
	ph := db.Dialect().Placeholder
	db.ExecContext(ctx, `DROP TABLE IF EXISTS demo_sends`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE demo_sends (item_id INT NOT NULL, shard INT NOT NULL, attempt INT NOT NULL)`); err != nil {
		return err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_sends`)
	keys := txn.NewKeys(db, txn.KeysOptions{})
	runs := jobs.NewRuns(db)
	fire := time.Now().UTC().Truncate(time.Second)
	job := fmt.Sprintf("demo-batch-%d", fire.Unix())
	const items = 10000
	// deliver processes a shard's items; an idempotency key per item makes
	// a retried shard skip what was already delivered
	deliver := func(run jobs.Run, stopAfter *int) error {
		for id := run.Shard + 1; id <= items; id += run.ShardTotal {
			if stopAfter != nil {
				if *stopAfter == 0 {
					return nil // the process "dies": no heartbeat, no completion
				}
				*stopAfter--
			}
			err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				c, err := keys.Begin(ctx, tx, job, fmt.Sprint(id), nil)
				if err != nil || c.Replay {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO demo_sends VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, id, run.Shard, run.Attempt); err != nil {
					return err
				}
				return keys.Complete(ctx, tx, job, fmt.Sprint(id), nil)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	e.printf("5. sharded batch: %d items over 2 shards; instance A dies after 2,000 deliveries\n", items)
	budget := 2000
	for shard := 0; shard < 2; shard++ {
		run, err := runs.Claim(ctx, job, fire, shard, 2, "A")
		if err != nil {
			return err
		}
		if err := deliver(run, &budget); err != nil {
			return err
		}
	}
	var before int
	db.QueryRowContext(ctx, `SELECT count(*) FROM demo_sends`).Scan(&before)
	grace := 500 * time.Millisecond
	time.Sleep(grace + 100*time.Millisecond)
	taken, err := runs.TakeOver(ctx, job, grace, "B")
	if err != nil {
		return err
	}
	for _, run := range taken {
		if err := deliver(run, nil); err != nil {
			return err
		}
		if err := runs.Finish(ctx, run, nil); err != nil {
			return err
		}
	}
	var total, distinct int
	db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT item_id) FROM demo_sends`).Scan(&total, &distinct)
	e.printf("   before the crash %d delivered; B took over %d shard runs (attempt 2) after the %v grace\n", before, len(taken), grace)
	e.printf("   delivered %d, distinct items %d, delivered twice %d\n", total, distinct, total-distinct)
	return nil
}
