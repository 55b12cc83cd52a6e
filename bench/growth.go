package bench

import (
	"database/sql"
	"strings"

	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/partitions"
)

// Growth measures each primitive's hot path and cleanup as its table grows:
// for each size, the table first holds that many rows a
// production table accumulates (published messages no cleanup removed yet,
// done idempotency keys 30 days old, a job's past runs, sessions of which
// one in ten expired), then each case runs for cfg.Duration. A case's ratio
// is against the same case on the empty table; a hot path measured while
// the table's cleanup runs is against the same hot path at that size
// without it. Table and index sizes are recorded at every size.
func Growth(ctx context.Context, db *sqlcoord.DB, cfg GrowthConfig) (GrowthReport, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Cleanup <= 0 {
		cfg.Cleanup = 10 * time.Second
	}
	if cfg.JobsMax <= 0 {
		cfg.JobsMax = 1_000_000
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{0, 1_000_000}
	}
	if len(cfg.Groups) == 0 {
		cfg.Groups = []string{"outbox", "keys", "jobs", "sessions"}
	}
	var rep GrowthReport
	g := &growth{db: db, cfg: cfg, rep: &rep}
	for _, grp := range cfg.Groups {
		g.base = cfg.Sizes[0]
		var err error
		switch grp {
		case "outbox":
			err = g.outbox(ctx)
		case "keys":
			err = g.keys(ctx)
		case "jobs":
			err = g.jobs(ctx)
		case "sessions":
			err = g.sessions(ctx)
		case "outbox-partitioned":
			err = g.outboxPartitioned(ctx)
		case "keys-partitioned":
			err = g.keysPartitioned(ctx)
		default:
			err = fmt.Errorf("bench: growth: unknown group %q (have outbox, outbox-partitioned, keys, keys-partitioned, jobs, sessions)", grp)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// outbox: for each size, coord_outbox first holds size published rows,
// then
//   - enqueue: one message per transaction from 8 clients (ops/s);
//   - drain: 20,000 pending messages by one relay, batches of 1,000, rows
//     marked published (msgs/s);
//   - a backlog: max(size, 20,000) pending messages; one relay claims,
//     publishes (no-op) and marks batches of 1,000 (batches/s over 20);
//   - Outbox.Cleanup of the published rows while producers enqueue.
func (g *growth) outbox(ctx context.Context) error {
	g.group, g.noun = "outbox-growth", "published rows"
	db := g.db
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_outbox`); err != nil {
		return err
	}
	ob := outbox.New(db)
	nop := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	have := 0 // published rows in the table
	for _, size := range g.cfg.Sizes {
		if size > have {
			g.say(fmt.Sprintf("  filling coord_outbox to %s published rows…", count(size)))
			if err := fill(ctx, db, size-have, "published"); err != nil {
				return err
			}
			have = size
		}
		enqueue := func(ctx context.Context, _ int) error {
			return ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
		}
		if err := g.enqueueAndDrain(ctx, ob, enqueue, nop, size); err != nil {
			return err
		}
		if err := fill(ctx, db, max(size, 20000), "pending"); err != nil {
			return err
		}
		relay, err := outbox.NewRelay(db, nop, outbox.RelayOptions{BatchSize: 1000})
		if err != nil {
			return err
		}
		if err := g.settle(ctx); err != nil {
			return err
		}
		reads0, readsOK := g.diskReads(ctx)
		start := time.Now()
		batches := 0
		for ; batches < 20; batches++ {
			if n, err := relay.Once(ctx); err != nil {
				return err
			} else if n == 0 {
				break
			}
		}
		el := time.Since(start)
		if batches > 0 {
			r := Result{Clients: 1, Ops: int64(batches), Elapsed: el, OpsPerS: float64(batches) / el.Seconds()}
			if reads1, ok := g.diskReads(ctx); ok && readsOK {
				per := (reads1 - reads0) / float64(batches)
				r.DiskReads = &per
			}
			g.add(r, "batch of 1,000 claimed and marked, backlog max(size, 20 k)", size, "")
		}
		// the backlog left is removed; published rows stay
		if _, err := db.ExecContext(ctx, `DELETE FROM coord_outbox WHERE state = 'pending'`); err != nil {
			return err
		}
		if size > 0 {
			if err := g.size(ctx, "coord_outbox"); err != nil {
				return err
			}
			if err := g.outboxCleanup(ctx, ob, size); err != nil {
				return err
			}
			if err := drainAll(ctx, db, nop, false); err != nil { // what enqueue left
				return err
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM coord_outbox`).Scan(&n); err != nil {
			return err
		}
		have = n
	}
	return nil
}

// during runs fn once while 8 clients run hot, measuring them over fn's
// whole run, against hotCase at the same size; it records fn's time and
// rows (the rows fn returns ÷ its time).
func (g *growth) during(ctx context.Context, n int, what, hotCase string, fn func(context.Context) (int64, error), hot Op) error {
	if err := g.settle(ctx); err != nil {
		return err
	}
	var finished atomic.Bool
	type outcome struct {
		rows int64
		took time.Duration
		err  error
	}
	done := make(chan outcome, 1)
	began := time.Now()
	go func() {
		rows, err := fn(ctx)
		o := outcome{rows, time.Since(began), err}
		finished.Store(true)
		done <- o
	}()
	r := measure(ctx, 8, func() (time.Time, bool) { return time.Now(), !finished.Load() }, hot)
	o := <-done
	if o.err != nil {
		return o.err
	}
	g.add(r, hotCase+" during "+what, n, g.name(hotCase, n))
	g.add(Result{Clients: 1, Ops: o.rows, Elapsed: o.took, OpsPerS: float64(o.rows) / o.took.Seconds()}, what+" (rows ÷ its time)", n, "")
	g.say(fmt.Sprintf("  %s at %s rows took %v", what, count(n), o.took.Round(time.Millisecond)))
	return nil
}

// enqueueAndDrain measures enqueue (8 clients) at size, drains what it
// left, then times one relay draining 20,000 messages.
func (g *growth) enqueueAndDrain(ctx context.Context, ob *outbox.Outbox[*sql.Tx], enqueue Op, nop outbox.Publisher, size int) error {
	g.add(g.measure(ctx, "enqueue", enqueue), "enqueue (8 clients)", size, "")
	if err := drainAll(ctx, g.db, nop, false); err != nil { // what enqueue left
		return err
	}
	for i := 0; i < 20000; i += 500 {
		ms := make([]outbox.Msg, 500)
		for j := range ms {
			ms[j] = outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)}
		}
		if err := ob.EnqueueNow(ctx, ms...); err != nil {
			return err
		}
	}
	if err := g.settle(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := drainAll(ctx, g.db, nop, false); err != nil {
		return err
	}
	el := time.Since(start)
	g.add(Result{Clients: 1, Ops: 20000, Elapsed: el, OpsPerS: 20000 / el.Seconds()}, "drain 20,000 (1 relay)", size, "")
	return nil
}

func ratioText(r Result) string {
	if r.Ratio == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f× %s", r.Ratio, r.Baseline)
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%d M", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%d k", n/1000)
	}
	return fmt.Sprint(n)
}

// drainAll publishes every pending message with one relay (batches of
// 1,000), deleting the rows or marking them published.
func drainAll(ctx context.Context, db *sqlcoord.DB, pub outbox.Publisher, del bool) error {
	r, err := outbox.NewRelay(db, pub, outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: del})
	if err != nil {
		return err
	}
	for {
		n, err := r.Once(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// fillSeq numbers the rows fill generates, for their message ids.
var fillSeq atomic.Int64

// fill inserts n outbox rows in state (published or pending), 100,000 per
// statement, generated by the server. Their message ids are ordered as
// Enqueue's UUIDv7 are (time first), not random: with the column's
// default, gen_random_uuid(), every row a relay marked published put a new
// entry at a random place of a unique index larger than the cache — what
// made the claim behind a 10 M backlog 0.44× the empty table's, a cost
// messages from Enqueue never pay.
func fill(ctx context.Context, db *sqlcoord.DB, n int, state string) error {
	for n > 0 {
		k := min(n, 100_000)
		off := fillSeq.Add(int64(k)) - int64(k)
		q := fmt.Sprintf(`INSERT INTO coord_outbox (topic, payload, headers, state, published_at, msg_id)
SELECT 'orders.created', '\x7b7d', '{}', '%s', %s,
  (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7000' || '8' || lpad(to_hex(g + %d), 15, '0'))::uuid
FROM generate_series(1, %d) g`, strings.TrimSuffix(state, "-old"), map[string]string{"published": "clock_timestamp()", "published-old": "clock_timestamp() - interval '2 days'", "pending": "NULL"}[state], off, k)
		if db.Dialect().Family() != "postgres" {
			q = fmt.Sprintf(`INSERT INTO coord_outbox (topic, payload, headers, state, created_at, available_at, published_at, msg_id)
SELECT 'orders.created', '{}', '{}', '%s', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), %s,
  CONCAT(SUBSTR(t.ms, 1, 8), '-', SUBSTR(t.ms, 9, 4), '-7000-8', SUBSTR(LPAD(HEX(seq + %d), 15, '0'), 1, 3), '-', SUBSTR(LPAD(HEX(seq + %d), 15, '0'), 4, 12))
FROM seq_1_to_%d CROSS JOIN (SELECT LPAD(HEX(FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000)), 12, '0') AS ms) t`, strings.TrimSuffix(state, "-old"), map[string]string{"published": "UTC_TIMESTAMP(6)", "published-old": "UTC_TIMESTAMP(6) - INTERVAL 2 DAY", "pending": "NULL"}[state], off, off, k)
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("bench: fill coord_outbox: %w", err)
		}
		n -= k
	}
	if db.Dialect().Family() == "postgres" {
		if _, err := db.ExecContext(ctx, `ANALYZE coord_outbox`); err != nil {
			return err
		}
		// write the fill's pages now, not during the next measurement
		// (needs superuser or pg_checkpoint: skipped otherwise)
		db.ExecContext(ctx, `CHECKPOINT`)
		return nil
	}
	_, err := db.ExecContext(ctx, `ANALYZE TABLE coord_outbox`)
	return err
}

// outboxPartitioned: the outbox group's cases on a partitioned outbox
// (partitions.Enable, GrowthConfig.PartitionSize ids a partition), the
// published rows two days old; in place of Outbox.Cleanup:
//   - at size 0 and the first size above it, enqueue on the plain table;
//   - partitions.Enable of the plain coord_outbox holding the first size
//     above 0, while producers enqueue (8 clients): its time, and their
//     throughput during it against enqueue at that size;
//   - partitions.Roll dropping every partition (and MariaDB's history
//     table) of the published rows while producers enqueue: its time, the
//     rows it dropped, and the producers' throughput during it.
func (g *growth) outboxPartitioned(ctx context.Context) error {
	g.group, g.noun = "outbox-partitioned", "published rows"
	db := g.db
	if _, err := partitions.Status(ctx, db); err == nil {
		return fmt.Errorf("bench: growth: coord_outbox is partitioned already: run outbox-partitioned on a database of its own")
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_outbox`); err != nil {
		return err
	}
	psize := int64(g.cfg.PartitionSize)
	if psize <= 0 {
		psize = 1_000_000
	}
	ob := outbox.New(db)
	nop := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	enqueue := func(ctx context.Context, _ int) error {
		return ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
	}
	enabled := false
	have := 0
	for _, size := range g.cfg.Sizes {
		if size > have {
			g.say(fmt.Sprintf("  filling coord_outbox to %s published rows…", count(size)))
			if err := fill(ctx, db, size-have, "published-old"); err != nil {
				return err
			}
			have = size
		}
		if !enabled {
			g.add(g.measure(ctx, "enqueue", enqueue), "enqueue (8 clients), not partitioned", size, "")
			if err := drainAll(ctx, db, nop, false); err != nil {
				return err
			}
			if size == 0 && !g.cfg.PartitionEmpty {
				continue // Enable runs on the first size with rows
			}
			err := g.during(ctx, size, "partitions.Enable", "enqueue (8 clients), not partitioned", func(ctx context.Context) (int64, error) {
				return int64(size), partitions.Enable(ctx, db, partitions.Options{Size: psize})
			}, enqueue)
			if err != nil {
				return err
			}
			enabled = true
			// what Enable wrote (PostgreSQL: two indexes of the whole
			// table) is flushed now, not during the next case — as fill
			// does (needs superuser or pg_checkpoint: skipped otherwise)
			if g.pg() {
				db.ExecContext(ctx, `CHECKPOINT`)
			}
		}
		if err := g.enqueueAndDrain(ctx, ob, enqueue, nop, size); err != nil {
			return err
		}
		if size == 0 {
			continue
		}
		// what the producers and the drain published is old too, so
		// that Roll may drop every partition the ids have passed
		old := `UPDATE coord_outbox SET published_at = clock_timestamp() - interval '2 days' WHERE state = 'published' AND published_at > clock_timestamp() - interval '1 day'`
		if db.Dialect().Family() != "postgres" {
			old = `UPDATE coord_outbox SET published_at = UTC_TIMESTAMP(6) - INTERVAL 2 DAY WHERE state = 'published' AND published_at > UTC_TIMESTAMP(6) - INTERVAL 1 DAY`
		}
		if _, err := db.ExecContext(ctx, old); err != nil {
			return err
		}
		if err := g.size(ctx, "coord_outbox"); err != nil {
			return err
		}
		// the rows it drops: those of every partition the ids passed
		// (and MariaDB's history table), counted before it runs
		var rows int64
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM coord_outbox`).Scan(&rows); err != nil {
			return err
		}
		if l, err := partitions.Status(ctx, db); err == nil && l.History != "" {
			var hist int64
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+l.History).Scan(&hist); err != nil {
				return err
			}
			rows += hist
		}
		err := g.during(ctx, size, "partitions.Roll", "enqueue (8 clients)", func(ctx context.Context) (int64, error) {
			res, err := partitions.Roll(ctx, db, partitions.RollOptions{OlderThan: 24 * time.Hour})
			g.say(fmt.Sprintf("  roll: %v", res))
			if len(res.Dropped) == 0 && err == nil {
				err = fmt.Errorf("bench: partitions.Roll dropped nothing: %+v", res)
			}
			return rows, err
		}, enqueue)
		if err != nil {
			return err
		}
		if err := drainAll(ctx, db, nop, false); err != nil {
			return err
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM coord_outbox`).Scan(&n); err != nil {
			return err
		}
		have = n
	}
	return nil
}
