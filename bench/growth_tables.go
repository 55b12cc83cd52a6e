package bench

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/partitions"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/txn"
)

// GrowthConfig says what `sqlcoord bench growth` measures.
type GrowthConfig struct {
	// Sizes: rows already in the table at each step, from 0, growing.
	// Jobs and sessions stop at JobsMax (the 1 M past runs and
	// sessions).
	Sizes   []int
	JobsMax int
	// Groups: outbox, keys, jobs, sessions.
	Groups   []string
	Duration time.Duration // per case; default 2 s
	// Cleanup: how long each cleanup case runs (time-boxed: at 10 M rows
	// it would take minutes); default 10 s.
	Cleanup time.Duration
	// CleanupDuties: each cleanup case runs once per value, through a
	// driver with that sqlcoord.Options.CleanupDuty (0: no pause);
	// default {0}.
	CleanupDuties []float64
	// CleanupRates: each cleanup case also runs once per value, through a
	// driver with that sqlcoord.Options.CleanupRate (rows per second).
	CleanupRates []float64
	// PartitionSize: ids per partition of the outbox-partitioned group
	// (default 1,000,000).
	PartitionSize int
	// PartitionEmpty: the outbox-partitioned group partitions the empty
	// table (its cases at every size then compare with a partitioned
	// table of 0 rows), instead of the table at the first size above 0
	// (which measures Enable on it).
	PartitionEmpty bool
	// KeyPeriod: the keys-partitioned group's partition period (default
	// 10 s: the cases wait two periods before the old keys may go).
	KeyPeriod time.Duration
	Progress  func(string)
}

// TableSize is a table's size on disk at a row count.
type TableSize struct {
	Dialect    string  `json:"dialect"`
	Table      string  `json:"table"`
	Rows       int64   `json:"rows"`
	DataBytes  int64   `json:"data_bytes"`
	IndexBytes int64   `json:"index_bytes"`
	DataMBPerM float64 `json:"data_mb_per_million_rows"`
	IdxMBPerM  float64 `json:"index_mb_per_million_rows"`
}

// GrowthReport is what Growth measured.
type GrowthReport struct {
	Results []Result    `json:"results"`
	Sizes   []TableSize `json:"sizes"`
}

// growth collects one group's cases with ratios against the same case at
// the first size (or, for "during cleanup" cases, against the hot path
// at the same size).
type growth struct {
	db     *sqlcoord.DB
	cfg    GrowthConfig
	group  string
	noun   string // what the table holds: "published rows", "keys"…
	base   int    // the size ratios are against (the first)
	rep    *GrowthReport
	warmed map[string]bool
}

func (g *growth) name(c string, n int) string { return fmt.Sprintf("%s, %s %s", c, count(n), g.noun) }

func (g *growth) add(r Result, c string, n int, baseline string) {
	r.Dialect, r.Group, r.Case = g.db.Dialect().Name(), g.group, g.name(c, n)
	if baseline == "" && n != g.base {
		baseline = g.name(c, g.base)
	}
	r.Baseline = baseline
	for _, b := range g.rep.Results {
		if b.Dialect == r.Dialect && b.Case == r.Baseline && b.OpsPerS > 0 {
			r.Ratio = r.OpsPerS / b.OpsPerS
		}
	}
	g.rep.Results = append(g.rep.Results, r)
	g.say(fmt.Sprintf("  %-8s %-60s %9.0f /s  p99 %-9v %s", r.Dialect, r.Case, r.OpsPerS, r.P99.Round(time.Microsecond), ratioText(r)))
}

// measure runs op from 8 clients for cfg.Duration, after a second of
// warm-up the first time case c runs (connections, caches, plans), and
// counts the server's WAL/redo per operation (growth reported 0 for
// every case before: it never read the counters).
func (g *growth) measure(ctx context.Context, c string, op Op) Result {
	if g.warmed == nil {
		g.warmed = map[string]bool{}
	}
	g.settle(ctx) // an error shows in the case's own statements
	if !g.warmed[g.group+c] {
		g.warmed[g.group+c] = true
		Measure(ctx, 8, time.Second, op)
	}
	before, ok := logCounters(ctx, g.db)
	r := Measure(ctx, 8, g.cfg.Duration, op)
	if after, ok2 := logCounters(ctx, g.db); ok && ok2 && r.Ops > 0 {
		n := float64(r.Ops)
		r.WALRecords, r.WALBytes, r.WALSyncs = (after[0]-before[0])/n, (after[1]-before[1])/n, (after[2]-before[2])/n
	}
	return r
}

func (g *growth) say(s string) {
	if g.cfg.Progress != nil {
		g.cfg.Progress(s)
	}
}

// diskReads is the server's count of pages read into its buffer cache
// (PostgreSQL: this database's blks_read, after flushStats; MariaDB:
// Innodb_buffer_pool_reads, server-wide).
func (g *growth) diskReads(ctx context.Context) (float64, bool) {
	var n float64
	if !g.pg() {
		var name string
		err := g.db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_reads'`).Scan(&name, &n)
		return n, err == nil
	}
	flushStats(ctx, g.db)
	err := g.db.QueryRowContext(ctx, `SELECT blks_read::float8 FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err == nil
}

func (g *growth) pg() bool { return g.db.Dialect().Family() == "postgres" }

// exec runs the PostgreSQL or the MySQL-family statement.
func (g *growth) exec(ctx context.Context, pgQ, myQ string) error {
	q := pgQ
	if !g.pg() {
		q = myQ
	}
	_, err := g.db.ExecContext(ctx, q)
	return err
}

// fillRows inserts n rows with stmt(offset, k) (k rows from offset+1),
// 100,000 per statement, then analyses the table.
func (g *growth) fillRows(ctx context.Context, table string, from, n int, stmt func(off, k int) (string, string)) error {
	g.say(fmt.Sprintf("  filling %s: %s rows more…", table, count(n)))
	for done := 0; done < n; {
		k := min(n-done, 100_000)
		pq, mq := stmt(from+done, k)
		if err := g.exec(ctx, pq, mq); err != nil {
			return fmt.Errorf("bench: fill %s: %w", table, err)
		}
		done += k
	}
	if err := g.exec(ctx, "ANALYZE "+table, "ANALYZE TABLE "+table); err != nil {
		return err
	}
	if g.pg() {
		g.db.ExecContext(ctx, `CHECKPOINT`) // the fill's pages written now, not while measuring
	}
	return nil
}

// settle waits, before every measured case, for the server to finish the
// work the steps before it left behind, so that each case measures its own:
// on MariaDB, InnoDB's purge of deleted and updated rows (the outbox group
// deletes its backlog of up to max(size, 20 k) pending rows in one
// transaction right before its cleanup cases — 300 k rows took purge 5 s,
// and a cleanup case measured meanwhile read 0.52× where a settled one read
// 0.86× — and a cleanup case's deletions were purged during the next case);
// on PostgreSQL, a VACUUM of the database (dead rows and hint bits, which
// autovacuum and the first readers would otherwise deal with during the
// case).
func (g *growth) settle(ctx context.Context) error {
	if g.pg() {
		_, err := g.db.ExecContext(ctx, `VACUUM`)
		return err
	}
	deadline := time.Now().Add(30 * time.Minute)
	said := false
	for time.Now().Before(deadline) {
		busy, what, err := g.purging(ctx)
		if err != nil || !busy {
			return err
		}
		if !said {
			g.say("  waiting for InnoDB to purge what the steps before deleted (" + what + ")…")
			said = true
		}
		if err := backoff.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// purging reports whether InnoDB's purge has work: its state in SHOW ENGINE
// INNODB STATUS ("running", not "running but idle"; the history list length
// counts transactions, and one DELETE of 10 M rows is one), or without the
// PROCESS privilege a history list of 1,000 transactions or more.
func (g *growth) purging(ctx context.Context) (bool, string, error) {
	var typ, name, status string
	if err := g.db.QueryRowContext(ctx, `SHOW ENGINE INNODB STATUS`).Scan(&typ, &name, &status); err == nil {
		for _, l := range strings.Split(status, "\n") {
			if strings.HasPrefix(l, "Purge done for") {
				_, state, _ := strings.Cut(l, "state: ")
				return strings.TrimSpace(state) == "running", strings.TrimSpace(l), nil
			}
		}
	}
	var hist int64
	if err := g.db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'`).Scan(&name, &hist); err != nil {
		return false, "", err
	}
	return hist >= 1000, fmt.Sprintf("history list length %d", hist), nil
}

// size records table's size at its current row count.
func (g *growth) size(ctx context.Context, table string) error {
	ts := TableSize{Dialect: g.db.Dialect().Name(), Table: table}
	if err := g.db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&ts.Rows); err != nil {
		return err
	}
	if g.pg() {
		g.db.ExecContext(ctx, `VACUUM `+table) // dead rows of the cases before: the size of live rows
		// summed over the partitions of a partitioned table
		if err := g.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(pg_table_size(relid)), 0)::bigint, COALESCE(SUM(pg_indexes_size(relid)), 0)::bigint FROM pg_partition_tree($1::regclass)`, table).Scan(&ts.DataBytes, &ts.IndexBytes); err != nil {
			return err
		}
	} else {
		g.db.ExecContext(ctx, `ANALYZE TABLE `+table)
		if err := g.db.QueryRowContext(ctx, `SELECT data_length, index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, table).Scan(&ts.DataBytes, &ts.IndexBytes); err != nil {
			return err
		}
	}
	if ts.Rows > 0 {
		ts.DataMBPerM = mb(ts.DataBytes) / (float64(ts.Rows) / 1e6)
		ts.IdxMBPerM = mb(ts.IndexBytes) / (float64(ts.Rows) / 1e6)
	}
	g.rep.Sizes = append(g.rep.Sizes, ts)
	return nil
}

func (g *growth) rows(ctx context.Context, table, where string) (int, error) {
	var n int
	err := g.db.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE `+where).Scan(&n)
	return n, err
}

// cleanupCase runs clean over and over for cfg.Cleanup while hot runs from
// 8 clients; it records the cleanup's rows deleted per second and the hot
// path's throughput during it, against hotCase measured at the same size
// without a cleanup.
func (g *growth) cleanupCase(ctx context.Context, n int, what, hotCase string, clean func(context.Context, *sqlcoord.DB) (int64, error), hot Op) error {
	var paces []sqlcoord.CleanupPace
	for _, d := range g.cfg.CleanupDuties {
		paces = append(paces, sqlcoord.CleanupPace{Duty: d})
	}
	for _, r := range g.cfg.CleanupRates {
		paces = append(paces, sqlcoord.CleanupPace{Rate: r})
	}
	if len(paces) == 0 {
		paces = []sqlcoord.CleanupPace{{}}
	}
	// Gentlest first, unpaced last: a case leaves work behind (autovacuum,
	// InnoDB purge of the rows it deleted) that taxes the next one — the
	// PostgreSQL outbox read 0.39× at duty 0.25 right after an unpaced
	// case, 0.93× on its own (settle now waits that work out as well).
	// Duties before rates, each in increasing order.
	rank := func(p sqlcoord.CleanupPace) (int, float64) {
		switch {
		case p.Rate > 0:
			return 1, p.Rate
		case p.Duty > 0 && p.Duty < 1:
			return 0, p.Duty
		}
		return 2, 0
	}
	slices.SortStableFunc(paces, func(a, b sqlcoord.CleanupPace) int {
		ka, va := rank(a)
		kb, vb := rank(b)
		return cmp.Or(cmp.Compare(ka, kb), cmp.Compare(va, vb))
	})
	for _, p := range paces {
		// the same pool, a driver whose cleanups pause as asked
		db, err := sqlcoord.WrapDB(ctx, g.db.DB, sqlcoord.Options{CleanupDuty: p.Duty, CleanupRate: p.Rate})
		if err != nil {
			return err
		}
		label := what
		switch k, v := rank(p); k {
		case 0:
			label = fmt.Sprintf("%s at CleanupDuty %g", what, v)
		case 1:
			label = fmt.Sprintf("%s at CleanupRate %g", what, v)
		}
		if err := g.cleanupOnce(ctx, n, label, hotCase, func(ctx context.Context) (int64, error) { return clean(ctx, db) }, hot); err != nil {
			return err
		}
	}
	return nil
}

func (g *growth) cleanupOnce(ctx context.Context, n int, what, hotCase string, clean func(context.Context) (int64, error), hot Op) error {
	if err := g.settle(ctx); err != nil {
		return err
	}
	before, logOK := logCounters(ctx, g.db)
	cctx, cancel := context.WithTimeout(ctx, g.cfg.Cleanup)
	defer cancel()
	var deleted int64
	done := make(chan error, 1)
	start := time.Now()
	var el time.Duration // the cleanup's own time: it may finish early
	go func() {
		var err error
		for cctx.Err() == nil {
			var k int64
			k, err = clean(cctx)
			deleted += k
			if err != nil && cctx.Err() != nil {
				err = nil // the time box ended it
			}
			if err != nil || k == 0 {
				break
			}
		}
		el = time.Since(start)
		done <- err
	}()
	r := Measure(ctx, 8, g.cfg.Cleanup, hot) // not cctx: its end would fail the ops in flight
	cancel()
	if err := <-done; err != nil {
		return err
	}
	if after, ok := logCounters(ctx, g.db); logOK && ok && r.Ops > 0 {
		// the hot path's and the cleanup's log together, per hot operation
		n := float64(r.Ops)
		r.WALRecords, r.WALBytes, r.WALSyncs = (after[0]-before[0])/n, (after[1]-before[1])/n, (after[2]-before[2])/n
	}
	g.add(r, hotCase+" during "+what, n, g.name(hotCase, n))
	g.add(Result{Clients: 1, Ops: deleted, Elapsed: el, OpsPerS: float64(deleted) / el.Seconds()},
		what+" (rows deleted/s, batches of 1,000)", n, "")
	return nil
}

// KeysGrowth: Keys.Record and Begin/Complete (8 clients, fresh keys, with a
// business insert) and Keys.Cleanup as coord_idempotency grows; the
// keys already there are done and 30 days old.
func (g *growth) keys(ctx context.Context) error {
	g.group, g.noun = "keys-growth", "keys"
	db := g.db
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_idempotency`); err != nil {
		return err
	}
	record, begin := keyOps(db)
	have, next := 0, 0 // fill keys in the table; the next key number (a cleanup deletes some)
	for _, size := range g.cfg.Sizes {
		if size > have {
			err := g.fillKeys(ctx, next, size-have, 0)
			if err != nil {
				return err
			}
			next += size - have
			have = size
		}
		g.add(g.measure(ctx, "record", record), "insert+Record (8 clients)", size, "")
		g.add(g.measure(ctx, "begin", begin), "Begin+Complete (8 clients)", size, "")
		if size > 0 {
			if err := g.size(ctx, "coord_idempotency"); err != nil {
				return err
			}
			err := g.cleanupCase(ctx, size, "Keys.Cleanup", "insert+Record (8 clients)",
				func(ctx context.Context, db *sqlcoord.DB) (int64, error) {
					return txn.NewKeys(db, txn.KeysOptions{}).Cleanup(ctx, 24*time.Hour, 1000)
				}, record)
			if err != nil {
				return err
			}
		}
		n, err := g.rows(ctx, "coord_idempotency", "scope = 'fill'")
		if err != nil {
			return err
		}
		// the keys the cases added are fresh: remove them, top the fill up
		if _, err := db.ExecContext(ctx, `DELETE FROM coord_idempotency WHERE scope = 'bench'`); err != nil {
			return err
		}
		have = n
	}
	return nil
}

// keyOps are the keys group's two cases: a fresh key recorded with its
// effect (Record), and one begun and completed (Begin+Complete), each in
// a transaction of its own.
func keyOps(db *sqlcoord.DB) (record, begin Op) {
	keys := txn.NewKeys(db, txn.KeysOptions{})
	fp := txn.Fingerprint([]byte("bench"))
	var seq atomic.Int64
	seq.Store(time.Now().UnixNano())
	record = func(ctx context.Context, _ int) error {
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			c, err := keys.Record(ctx, tx, "bench", fmt.Sprint(seq.Add(1)), fp, []byte("ok"))
			if err == nil && c.Replay {
				err = fmt.Errorf("replayed a fresh key")
			}
			return err
		})
	}
	begin = func(ctx context.Context, _ int) error {
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			k := fmt.Sprint(seq.Add(1))
			if _, err := keys.Begin(ctx, tx, "bench", k, fp); err != nil {
				return err
			}
			return keys.Complete(ctx, tx, "bench", k, []byte("ok"))
		})
	}
	return record, begin
}

// fillKeys adds n done keys of scope 'fill', numbered from off, created 30
// days ago, in period (0 on a plain table).
func (g *growth) fillKeys(ctx context.Context, off, n int, period int64) error {
	return g.fillRows(ctx, "coord_idempotency", off, n, func(off, k int) (string, string) {
		return fmt.Sprintf(`INSERT INTO coord_idempotency (scope, idem_key, fingerprint, state, response, locked_until, created_at, updated_at, period)
SELECT 'fill', 'req-' || (g + %d), sha256(int8send(g + %d)), 'done', '\x6f6b', clock_timestamp() - interval '30 days', clock_timestamp() - interval '30 days', clock_timestamp() - interval '30 days', %d
FROM generate_series(1, %d) g`, off, off, period, k),
			fmt.Sprintf(`INSERT INTO coord_idempotency (scope, idem_key, fingerprint, state, response, locked_until, created_at, updated_at, period)
SELECT 'fill', CONCAT('req-', seq + %d), UNHEX(SHA2(seq + %d, 256)), 'done', 'ok', UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY, %d
FROM seq_1_to_%d`, off, off, period, k)
	})
}

// keysPartitioned: the keys cases on coord_idempotency partitioned by
// period. At the first size above 0 the filled plain table is measured,
// then partitions.EnableKeys runs on it while 8 clients record keys; at
// every size the cases run on the partitioned table holding size filled
// keys, then, once the filled keys are out of every claim's reach (the
// legacy partition's after two periods; later sizes are filled into the
// current period's partition), partitions.RollKeys drops them while 8
// clients record keys.
func (g *growth) keysPartitioned(ctx context.Context) error {
	g.group, g.noun = "keys-partitioned", "keys"
	db := g.db
	if _, err := partitions.KeysStatus(ctx, db); err == nil {
		return fmt.Errorf("bench: growth: coord_idempotency is partitioned already: run keys-partitioned on a database of its own")
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_idempotency`); err != nil {
		return err
	}
	period := g.cfg.KeyPeriod
	if period <= 0 {
		period = 10 * time.Second
	}
	record, begin := keyOps(db)
	enabled := false
	next := 0
	var fillPeriod int64 // the newest period holding filled keys
	for _, size := range g.cfg.Sizes {
		if size > 0 {
			if enabled {
				l, err := partitions.KeysStatus(ctx, db)
				if err != nil {
					return err
				}
				fillPeriod = l.Current
			}
			if err := g.fillKeys(ctx, next, size, fillPeriod); err != nil {
				return err
			}
			next += size
		}
		if !enabled {
			g.add(g.measure(ctx, "record", record), "insert+Record (8 clients), not partitioned", size, "")
			g.add(g.measure(ctx, "begin", begin), "Begin+Complete (8 clients), not partitioned", size, "")
			if size == 0 {
				continue
			}
			if err := g.size(ctx, "coord_idempotency"); err != nil {
				return err
			}
			err := g.during(ctx, size, "partitions.EnableKeys", "insert+Record (8 clients), not partitioned", func(ctx context.Context) (int64, error) {
				return int64(size), partitions.EnableKeys(ctx, db, partitions.KeysOptions{Period: period})
			}, record)
			if err != nil {
				return err
			}
			enabled = true
			if g.pg() {
				db.ExecContext(ctx, `CHECKPOINT`)
			}
		}
		g.add(g.measure(ctx, "record", record), "insert+Record (8 clients)", size, g.name("insert+Record (8 clients), not partitioned", g.base))
		g.add(g.measure(ctx, "begin", begin), "Begin+Complete (8 clients)", size, g.name("Begin+Complete (8 clients), not partitioned", g.base))
		if size == 0 {
			continue
		}
		if err := g.size(ctx, "coord_idempotency"); err != nil {
			return err
		}
		for { // until the filled keys are out of every claim's reach
			l, err := partitions.KeysStatus(ctx, db)
			if err != nil {
				return err
			}
			if l.Current > max(l.LegacyUntil, fillPeriod) {
				break
			}
			g.say(fmt.Sprintf("  waiting for the periods to pass (now %d; filled keys claimable until %d)…", l.Current, max(l.LegacyUntil, fillPeriod)))
			time.Sleep(period / 2)
		}
		var rows int64
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM coord_idempotency WHERE scope = 'fill'`).Scan(&rows); err != nil {
			return err
		}
		err := g.during(ctx, size, "partitions.RollKeys", "insert+Record (8 clients)", func(ctx context.Context) (int64, error) {
			res, err := partitions.RollKeys(ctx, db, partitions.KeysOptions{})
			g.say(fmt.Sprintf("  roll keys: made %d, dropped %v", len(res.Created), res.Dropped))
			if len(res.Dropped) == 0 && err == nil {
				err = fmt.Errorf("bench: partitions.RollKeys dropped nothing")
			}
			return rows, err
		}, record)
		if err != nil {
			return err
		}
		next = 0 // the filled keys are gone
	}
	return nil
}

// sessions: Store.Load of a random live session (8 clients) and
// session.Cleanup as coord_sessions grows; one session in ten expired two
// days ago.
func (g *growth) sessions(ctx context.Context) error {
	g.group, g.noun = "sessions-growth", "sessions"
	db := g.db
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_sessions`); err != nil {
		return err
	}
	st, err := session.NewStore(db, session.Options{IdleTimeout: 24 * time.Hour, AbsoluteTimeout: 7 * 24 * time.Hour})
	if err != nil {
		return err
	}
	have := 0
	g.base = max(g.cfg.Sizes[0], 1000)
	for _, size := range g.cfg.Sizes {
		if size > g.cfg.JobsMax {
			break
		}
		size = max(size, 1000) // Load finds a session: the empty table is 1,000 of them
		if size > have {
			err := g.fillRows(ctx, "coord_sessions", have, size-have, func(off, k int) (string, string) {
				return fmt.Sprintf(`INSERT INTO coord_sessions (id_hash, user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at)
SELECT sha256(convert_to('tok-' || (g + %d), 'UTF8')), 'user-' || ((g + %d) %% 100000), '\x7b7d', 1, clock_timestamp(), clock_timestamp(),
  CASE WHEN (g + %d) %% 10 = 0 THEN clock_timestamp() - interval '2 days' ELSE clock_timestamp() + interval '1 day' END, clock_timestamp() + interval '7 days'
FROM generate_series(1, %d) g`, off, off, off, k),
					fmt.Sprintf(`INSERT INTO coord_sessions (id_hash, user_id, data, version, created_at, last_seen_at, idle_expires_at, abs_expires_at)
SELECT UNHEX(SHA2(CONCAT('tok-', seq + %d), 256)), CONCAT('user-', (seq + %d) %% 100000), '{}', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
  IF((seq + %d) %% 10 = 0, UTC_TIMESTAMP(6) - INTERVAL 2 DAY, UTC_TIMESTAMP(6) + INTERVAL 1 DAY), UTC_TIMESTAMP(6) + INTERVAL 7 DAY
FROM seq_1_to_%d`, off, off, off, k)
			})
			if err != nil {
				return err
			}
			have = size
		}
		// Load: a random live token (tok-N with N not a multiple of 10);
		// an empty table: a token that is not there.
		load := func(ctx context.Context, _ int) error {
			i := rand.IntN(size-1) + 1 // 1 … size-1: not a multiple of 10 below
			if i%10 == 0 {
				i--
			}
			_, err := st.Load(ctx, fmt.Sprintf("tok-%d", i))
			return err
		}
		g.add(g.measure(ctx, "load", load), "Load (8 clients)", size, "")
		// the same lookup by hand: one primary-key read of a random
		// 32-byte key — what any session store keyed by a token hash does
		q := `SELECT data FROM coord_sessions WHERE id_hash = ` + db.Dialect().Placeholder(1)
		byHand := func(ctx context.Context, _ int) error {
			i := rand.IntN(size-1) + 1
			if i%10 == 0 {
				i--
			}
			h := sha256.Sum256([]byte(fmt.Sprintf("tok-%d", i)))
			var data []byte
			return db.QueryRowContext(ctx, q, h[:]).Scan(&data)
		}
		g.add(g.measure(ctx, "byhand", byHand), "primary-key read by hand (8 clients)", size, "")
		if size > g.base {
			if err := g.size(ctx, "coord_sessions"); err != nil {
				return err
			}
			if err := g.cleanupCase(ctx, size, "session.Cleanup", "Load (8 clients)",
				func(ctx context.Context, db *sqlcoord.DB) (int64, error) {
					return session.Cleanup(ctx, db, 24*time.Hour, 1000)
				}, load); err != nil {
				return err
			}
			// put the expired ones back for the next size
			if _, err := db.ExecContext(ctx, `DELETE FROM coord_sessions`); err != nil {
				return err
			}
			have = 0
		}
	}
	return nil
}

// jobs: slot claims (8 instances competing for each slot) and the
// scheduler's takeover scan (TakeOver, what every instance runs each
// tick) for a job with that many past runs.
func (g *growth) jobs(ctx context.Context) error {
	g.group, g.noun = "jobs-growth", "past runs"
	db := g.db
	const job = "bench-growth"
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_job_runs WHERE job = '`+job+`'`); err != nil {
		return err
	}
	runs := jobs.NewRuns(db)
	have, next := 0, 0 // past runs in the table; the next fire second (a cleanup deletes some)
	for si, size := range g.cfg.Sizes {
		if size > g.cfg.JobsMax {
			break
		}
		if size > have {
			err := g.fillRows(ctx, "coord_job_runs", next, size-have, func(off, k int) (string, string) {
				return fmt.Sprintf(`INSERT INTO coord_job_runs (job, fire_time, shard, shard_total, status, owner, attempt, started_at, heartbeat_at, finished_at)
SELECT '%s', t, 0, 1, 'succeeded', 'fill', 1, t, t, t FROM (SELECT timestamptz '2020-01-01 00:00:00+00' + (g + %d) * interval '1 second' AS t FROM generate_series(1, %d) g) s`, job, off, k),
					fmt.Sprintf(`INSERT INTO coord_job_runs (job, fire_time, shard, shard_total, status, owner, attempt, started_at, heartbeat_at, finished_at)
SELECT '%s', t, 0, 1, 'succeeded', 'fill', 1, t, t, t FROM (SELECT TIMESTAMP '2020-01-01 00:00:00' + INTERVAL (seq + %d) SECOND AS t FROM seq_1_to_%d) s`, job, off, k)
			})
			if err != nil {
				return err
			}
			next += size - have
			have = size
		}
		// new slots after every past one, a fresh range per size
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(si) * 1000 * time.Hour)
		var won atomic.Int64
		per := make([]int64, 8)
		r := Measure(ctx, 8, g.cfg.Duration, func(ctx context.Context, w int) error {
			// the 8 instances try the same slots in turn; one wins each
			slot := base.Add(time.Duration(per[w]) * time.Second)
			per[w]++
			if _, err := runs.Claim(ctx, job, slot, 0, 1, fmt.Sprint(w)); err == nil {
				won.Add(1)
			} else if err != jobs.ErrAlreadyClaimed {
				return err
			}
			return nil
		})
		r.Ops, r.OpsPerS = won.Load(), float64(won.Load())/r.Elapsed.Seconds()
		g.add(r, "slots claimed/s (8 instances)", size, "")
		// finish what was claimed: the table holds past runs only again
		if _, err := db.ExecContext(ctx, `UPDATE coord_job_runs SET status = 'succeeded', finished_at = heartbeat_at WHERE job = '`+job+`' AND status = 'running'`); err != nil {
			return err
		}
		g.add(g.measure(ctx, "scan", func(ctx context.Context, w int) error {
			_, err := runs.TakeOver(ctx, job, time.Minute, "scanner")
			return err
		}), "takeover scan (TakeOver, 8 instances)", size, "")
		if size > 0 {
			if err := g.size(ctx, "coord_job_runs"); err != nil {
				return err
			}
			// the past runs are years old: Cleanup may delete them all
			scan := func(ctx context.Context, w int) error {
				_, err := runs.TakeOver(ctx, job, time.Minute, "scanner")
				return err
			}
			if err := g.cleanupCase(ctx, size, "Runs.Cleanup", "takeover scan (TakeOver, 8 instances)",
				func(ctx context.Context, db *sqlcoord.DB) (int64, error) {
					return jobs.NewRuns(db).Cleanup(ctx, job, 24*time.Hour, 1000)
				}, scan); err != nil {
				return err
			}
		}
		n, err := g.rows(ctx, "coord_job_runs", "job = '"+job+"' AND owner = 'fill'")
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM coord_job_runs WHERE job = '`+job+`' AND owner <> 'fill'`); err != nil {
			return err
		}
		have = n
	}
	return nil
}

// outboxCleanup: Outbox.Cleanup of the published rows while producers
// enqueue (8 clients).
func (g *growth) outboxCleanup(ctx context.Context, ob *outbox.Outbox[*sql.Tx], size int) error {
	enqueue := func(ctx context.Context, _ int) error {
		return ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
	}
	return g.cleanupCase(ctx, size, "Outbox.Cleanup", "enqueue (8 clients)",
		func(ctx context.Context, db *sqlcoord.DB) (int64, error) { return outbox.New(db).Cleanup(ctx, 0, 1000) }, enqueue)
}

// SizesMarkdown renders table and index sizes per million rows.
func SizesMarkdown(ts []TableSize) string {
	var b strings.Builder
	b.WriteString("| dialect | table | rows | data MB | index MB | data MB per M rows | index MB per M rows |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, t := range ts {
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %.1f | %.1f |\n", t.Dialect, t.Table, t.Rows, mb(t.DataBytes), mb(t.IndexBytes), t.DataMBPerM, t.IdxMBPerM)
	}
	return b.String()
}

// GrowthChart writes a PNG: per dialect, each case's throughput as a ratio
// to the empty table (1.0 is flat; the bound is 1/1.2), against
// the rows in the table.
func GrowthChart(rs []Result, path string) error {
	var dialects []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Dialect] {
			seen[r.Dialect] = true
			dialects = append(dialects, r.Dialect)
		}
	}
	if len(dialects) == 0 {
		return fmt.Errorf("bench: nothing to chart")
	}
	var plots [][]*plot.Plot
	for _, d := range dialects {
		p := plot.New()
		p.Title.Text = d + ": throughput vs the empty table"
		p.X.Label.Text = "rows already in the table (millions)"
		p.Y.Label.Text = "ratio"
		p.Legend.Top = true
		p.Legend.Left = true
		lines := map[string]plotter.XYs{}
		var order []string
		for _, r := range rs {
			if r.Dialect != d || !strings.Contains(r.Case, ", ") || strings.Contains(r.Case, " during ") || strings.Contains(r.Case, "Cleanup") {
				continue
			}
			i := strings.LastIndex(r.Case, ", ")
			c, sz := r.Group+": "+r.Case[:i], r.Case[i+2:]
			x := parseCount(sz) / 1e6
			y := 1.0
			if r.Ratio > 0 {
				y = r.Ratio
			} else if r.Baseline != "" {
				continue
			}
			if _, ok := lines[c]; !ok {
				order = append(order, c)
			}
			lines[c] = append(lines[c], plotter.XY{X: x, Y: y})
		}
		for i, c := range order {
			l, pts, err := plotter.NewLinePoints(lines[c])
			if err != nil {
				return err
			}
			col := palette[i%len(palette)]
			l.Color, pts.Color = col, col
			l.Dashes = [][]vg.Length{nil, {vg.Points(4), vg.Points(2)}, {vg.Points(1), vg.Points(2)}}[i/len(palette)%3]
			pts.Shape = draw.GlyphDrawer([]draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}[i%4])
			p.Add(l, pts)
			p.Legend.Add(c, l, pts)
		}
		bound := plotter.NewFunction(func(float64) float64 { return 1 / 1.2 })
		bound.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(bound)
		p.Legend.Add("1/1.2 (the issue's bound)", bound)
		p.Y.Min = 0
		plots = append(plots, []*plot.Plot{p})
	}
	img := vgimg.New(vg.Points(1000), vg.Points(float64(560*len(plots))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	return savePNG(img, path)
}

// parseCount reads count's "0", "20 k", "1 M", "10 M".
func parseCount(s string) float64 {
	var n float64
	var unit string
	fmt.Sscanf(s, "%g %s", &n, &unit)
	switch unit {
	case "k":
		return n * 1e3
	case "M":
		return n * 1e6
	}
	return n
}
